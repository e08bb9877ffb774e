"""``trainer.compile``: the minibatch loss (or, on one process, the whole gradient step) through
torch.compile, compiled when the step is chosen, without moving the weights."""

import pytest
import torch

from gpu_envs.runs.config import ModelConfig, PolicyConfig
from gpu_envs.runs.speed import PhaseTimer
from gpu_envs.trainers import fused_step, learner, ppo
from gpu_envs.trainers.game_faces import make_game
from gpu_envs.trainers.policy import ActorCritic
from gpu_envs.trainers.rollout import Collector, PolicyGroup
from gpu_envs.trainers.sampling import TorchSampler

BACKWARD = torch.Tensor.backward  # what fabric.backward does on one process


def _group_and_rollout(num_minibatches: int = 3, optimizer=torch.optim.Adam, **optimizer_kwargs):
    torch.manual_seed(0)
    game = make_game("cartpole", 4, torch.device("cpu"), {"max_episode_steps": 500})
    cfg = PolicyConfig(
        update_epochs=2, num_minibatches=num_minibatches, model=ModelConfig(fc_dims=[8])
    )
    module = ActorCritic(4, (2,), cfg.model)
    group = PolicyGroup(
        "agent",
        cfg,
        module,
        module,
        optimizer(module.parameters(), lr=1e-3, eps=1e-5, **optimizer_kwargs),
        slice(0, 1),
        1,
    )
    collector = Collector(game, [group], 10, TorchSampler(0), PhaseTimer(torch.device("cpu")))
    collector.reset(seed=0)
    return group, collector


def _weights(module):
    return [p.detach().clone() for p in module.parameters()]


def test_compile_at_warm_up_leaves_weights_and_optimizer_untouched_then_matches_eager():
    group, collector = _group_and_rollout()
    before = _weights(group.module)
    group.step = learner.make_step(group, BACKWARD, (2,), compile_on=collector.buffers["agent"])
    assert group.step.kind == "compiled loss"
    assert all(torch.equal(a, b) for a, b in zip(before, group.module.parameters()))
    assert all(p.grad is None for p in group.module.parameters()) and not group.optimizer.state

    buf = collector.collect()["agent"]
    data = ppo.flatten(buf, buf.values, buf.values)
    mb = ppo.prepare({key: value[:14] for key, value in data.items()}, group.config)  # of 14+14+12
    eager_loss, eager_stats, eager_log_ratio = ppo.minibatch_loss(
        group.model, mb, (2,), group.config
    )
    loss, stats, log_ratio = group.step.loss_fn(group.model, mb, (2,), group.config)
    torch.testing.assert_close(loss, eager_loss)
    torch.testing.assert_close(stats, eager_stats)
    torch.testing.assert_close(log_ratio, eager_log_ratio)

    result = ppo.update(group, buf)
    assert result["first_ratio_deviation"].item() < 1e-5  # compiled vs eager rounding only
    assert any(not torch.equal(a, b) for a, b in zip(before, group.module.parameters()))


@pytest.mark.parametrize("fuse_optimizer", [False, True])
def test_compile_failure_warns_and_trains_eagerly(monkeypatch, fuse_optimizer):
    def broken_compile(function):
        def fail(*args, **kwargs):
            raise RuntimeError("no C++ compiler")

        return fail

    monkeypatch.setattr(torch, "compile", broken_compile)
    group, collector = _group_and_rollout(num_minibatches=1)
    message = "trainer.compile: torch.compile failed for policy 'agent'.*no C\\+\\+ compiler"
    with pytest.warns(UserWarning, match=message):
        group.step = learner.make_step(
            group, BACKWARD, (2,), compile_on=collector.buffers["agent"], fuse=fuse_optimizer
        )
    assert group.step.kind == "eager"
    result = ppo.update(group, collector.collect()["agent"])
    assert result["first_ratio_deviation"].item() == 0.0


@pytest.mark.parametrize("num_minibatches", [3, 1])
def test_fused_step_compiles_without_moving_anything_then_trains_like_eager_adam(num_minibatches):
    """The fused step (loss, gradient, clipping, Adam in one graph) against the eager step it
    replaces; with one minibatch, all the update's epochs in one compiled call."""
    eager, collector = _group_and_rollout(num_minibatches, fused=True)
    fused, _ = _group_and_rollout(num_minibatches, fused=True)
    fused.config.max_grad_norm = eager.config.max_grad_norm = (
        0.05  # small enough to clip every step
    )
    before = _weights(fused.module)
    eager.step = learner.make_step(eager, BACKWARD, (2,))
    fused.step = learner.make_step(
        fused, BACKWARD, (2,), compile_on=collector.buffers["agent"], fuse=True
    )
    assert fused.step.kind == "fused" and eager.step.kind == "eager"
    assert all(torch.equal(a, b) for a, b in zip(before, fused.module.parameters()))
    assert not fused.optimizer.state
    epoch_calls, run_epochs = [], fused.step.epochs
    fused.step.epochs = lambda mb, epochs: epoch_calls.append(epochs) or run_epochs(mb, epochs)

    for _ in range(3):
        buf = collector.collect()["agent"]
        torch.manual_seed(1)  # the same minibatch order for both
        eager_result = ppo.update(eager, buf)
        torch.manual_seed(1)
        fused_result = ppo.update(fused, buf)
        for key in ("total_loss", "policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm"):
            torch.testing.assert_close(fused_result[key], eager_result[key], rtol=1e-4, atol=1e-6)
    assert fused_result["grad_norm"] > 0.05  # the clipping was exercised
    assert epoch_calls == ([2, 2, 2] if num_minibatches == 1 else [])  # one call per update
    for a, b in zip(fused.module.parameters(), eager.module.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    # The optimizer state is torch's Adam's own: same keys, same step count, same moments.
    eager_state, fused_state = eager.optimizer.state_dict(), fused.optimizer.state_dict()
    assert eager_state["param_groups"] == fused_state["param_groups"]
    for index, state in eager_state["state"].items():
        assert fused_state["state"][index].keys() == state.keys()
        steps = 3 * 2 * num_minibatches  # updates x epochs x minibatches
        assert fused_state["state"][index]["step"].item() == state["step"].item() == steps
        torch.testing.assert_close(
            fused_state["state"][index]["exp_avg"], state["exp_avg"], rtol=1e-4, atol=1e-7
        )


def test_fused_step_follows_an_optimizer_state_loaded_from_a_checkpoint():
    group, collector = _group_and_rollout(num_minibatches=1)
    group.step = learner.make_step(
        group, BACKWARD, (2,), compile_on=collector.buffers["agent"], fuse=True
    )
    ppo.update(group, collector.collect()["agent"])
    saved = group.optimizer.state_dict()
    group.optimizer.load_state_dict(saved)  # new state tensors, as a resume makes them
    ppo.update(group, collector.collect()["agent"])
    assert all(state["step"].item() == 4 for state in group.optimizer.state.values())


@pytest.mark.parametrize(
    "optimizer, kwargs",
    [
        (torch.optim.AdamW, {}),
        (torch.optim.Adam, {"weight_decay": 0.1}),
        (torch.optim.Adam, {"amsgrad": True}),
    ],
)
def test_an_optimizer_the_fused_step_does_not_reproduce_gets_the_compiled_loss(optimizer, kwargs):
    group, collector = _group_and_rollout(num_minibatches=1, optimizer=optimizer, **kwargs)
    assert not fused_step.supports(group.optimizer)
    group.step = learner.make_step(
        group, BACKWARD, (2,), compile_on=collector.buffers["agent"], fuse=True
    )
    assert group.step.kind == "compiled loss"
