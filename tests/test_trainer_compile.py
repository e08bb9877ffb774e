"""``trainer.compile``: the minibatch loss through torch.compile, compiled at warm-up without moving the weights."""

import pytest
import torch

from gpu_envs.trainers import learner
from gpu_envs.trainers.config import ModelConfig, PolicyConfig
from gpu_envs.trainers.games import CartPoleGame
from gpu_envs.trainers.policy import ActorCritic
from gpu_envs.trainers.rollout import Collector, PolicyGroup
from gpu_envs.trainers.sampling import TorchSampler
from gpu_envs.trainers.timing import PhaseTimer


class NoFabric:
    backward = staticmethod(lambda loss: loss.backward())


def _group_and_rollout(num_minibatches: int = 3):
    torch.manual_seed(0)
    game = CartPoleGame(4, torch.device("cpu"), {"max_episode_steps": 500})
    cfg = PolicyConfig(update_epochs=2, num_minibatches=num_minibatches, model=ModelConfig(fc_dims=[8]))
    module = ActorCritic(4, (2,), cfg.model)
    group = PolicyGroup("agent", cfg, module, module, torch.optim.Adam(module.parameters(), lr=1e-3, eps=1e-5),
                        slice(0, 1), 1)
    collector = Collector(game, [group], 10, TorchSampler(0), PhaseTimer(torch.device("cpu")))
    collector.reset(seed=0)
    return group, collector


def _weights(module):
    return [p.detach().clone() for p in module.parameters()]


def test_compile_at_warm_up_leaves_weights_and_optimizer_untouched_then_matches_eager():
    group, collector = _group_and_rollout()
    before = _weights(group.module)
    learner.compile_loss(NoFabric, group, collector.buffers["agent"], (2,))
    assert group.loss_fn is not None
    assert all(torch.equal(a, b) for a, b in zip(before, group.module.parameters()))
    assert all(p.grad is None for p in group.module.parameters()) and not group.optimizer.state

    buf = collector.collect()["agent"]
    data = learner._flatten(buf, buf.values, buf.values)
    mb = learner._minibatch({key: value[:14] for key, value in data.items()}, True)  # 40 = 14 + 14 + 12
    eager_loss, eager_stats, eager_log_ratio = learner.minibatch_loss(group.model, mb, (2,), group.config)
    loss, stats, log_ratio = group.loss_fn(group.model, mb, (2,), group.config)
    torch.testing.assert_close(loss, eager_loss)
    torch.testing.assert_close(stats, eager_stats)
    torch.testing.assert_close(log_ratio, eager_log_ratio)

    result = learner.update(NoFabric, group, buf, (2,))
    assert result["first_ratio_deviation"].item() < 1e-5  # compiled vs eager rounding only
    assert any(not torch.equal(a, b) for a, b in zip(before, group.module.parameters()))


def test_compile_failure_warns_and_trains_eagerly(monkeypatch):
    def broken_compile(function):
        def fail(*args, **kwargs):
            raise RuntimeError("no C++ compiler")
        return fail

    monkeypatch.setattr(torch, "compile", broken_compile)
    group, collector = _group_and_rollout(num_minibatches=1)
    message = "trainer.compile: torch.compile failed for policy 'agent'.*no C\\+\\+ compiler"
    with pytest.warns(UserWarning, match=message):
        learner.compile_loss(NoFabric, group, collector.buffers["agent"], (2,))
    assert group.loss_fn is None
    result = learner.update(NoFabric, group, collector.collect()["agent"], (2,))
    assert result["first_ratio_deviation"].item() == 0.0
