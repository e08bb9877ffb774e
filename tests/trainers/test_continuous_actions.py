"""Box actions: the Gaussian head, its samplers, clipping before the env, greedy means, checkpoints
with the head, and ``gpu-envs train pendulum`` learning."""

import math

import pytest
import torch
from torch.distributions import Normal

from gpu_envs.runs.checkpoint import load_checkpoint
from gpu_envs.runs.config import ModelConfig, PolicyConfig, RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.runs.speed import PhaseTimer
from gpu_envs.trainers.evaluation import Evaluator
from gpu_envs.trainers.game_faces import make_game
from gpu_envs.trainers.policy import (
    ActorCritic,
    ContinuousActions,
    greedy_actions,
    is_continuous,
    log_prob,
    log_prob_entropy,
)
from gpu_envs.trainers.rollout import Collector, PolicyGroup
from gpu_envs.trainers.sampling import NumbaSampler, TorchSampler

CPU = torch.device("cpu")


def _network(dims: int = 1, fc_dims=(8,)) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(3, ContinuousActions(dims), ModelConfig(fc_dims=list(fc_dims)))


def test_continuous_actions_look_like_an_nvec_of_mean_and_log_std_pairs():
    actions = ContinuousActions(3)
    assert len(actions) == 3 and sum(actions) == 6 and is_continuous(actions)
    assert not is_continuous((2, 2, 2))
    with pytest.raises(ValueError, match="at least one dimension"):
        ContinuousActions(0)


def test_gaussian_head_has_a_state_independent_log_std_in_its_logits():
    network = _network(dims=2)
    with torch.no_grad():
        network.log_std.copy_(torch.tensor([0.3, -1.2]))
    logits, values = network(torch.randn(5, 3))
    assert logits.shape == (5, 4) and values.shape == (5,)
    assert torch.equal(logits[:, 2:], torch.tensor([[0.3, -1.2]]).expand(5, 2))
    assert "log_std" in network.state_dict()


def test_log_prob_and_entropy_equal_torch_normal_summed_over_dims():
    torch.manual_seed(1)
    mean, log_std, actions = torch.randn(64, 3), torch.randn(64, 3), 3 * torch.randn(64, 3)
    logits = torch.cat([mean, log_std], -1)
    normal = Normal(mean, log_std.exp())
    logp, entropy = log_prob_entropy(logits, actions, ContinuousActions(3))
    torch.testing.assert_close(logp, normal.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, normal.entropy().sum(-1))
    torch.testing.assert_close(log_prob(logits, actions, ContinuousActions(3)), logp)


def test_greedy_action_is_the_mean():
    logits = torch.tensor([[0.7, -2.5, 5.0, 5.0]])
    assert torch.equal(greedy_actions(logits, ContinuousActions(2)), torch.tensor([[0.7, -2.5]]))


@pytest.mark.parametrize("kind", [TorchSampler, NumbaSampler])
def test_samplers_draw_the_gaussian_unclipped(kind):
    torch.manual_seed(0)
    logits = torch.tensor([[1.5, -0.5, math.log(2.0), math.log(0.1)]]).repeat(40000, 1)
    actions = kind(3)(logits, ContinuousActions(2))
    assert actions.shape == (40000, 2) and actions.dtype == torch.float32
    torch.testing.assert_close(actions.mean(0), torch.tensor([1.5, -0.5]), atol=0.03, rtol=0)
    torch.testing.assert_close(actions.std(0), torch.tensor([2.0, 0.1]), atol=0.03, rtol=0)
    assert actions[:, 0].max() > 2.0 and actions[:, 0].min() < -2.0  # the samplers do not clip


def test_numba_gaussian_draws_depend_on_seed_and_counter_only():
    logits = torch.zeros(6, 2)
    first, second = NumbaSampler(5), NumbaSampler(5)
    a = first(logits, ContinuousActions(1))
    assert torch.equal(a, second(logits, ContinuousActions(1)))
    assert not torch.equal(a, first(logits, ContinuousActions(1)))  # the counter moved
    assert first.state_dict() == {"counter": 2}


def test_pendulum_game_clips_torques_to_the_action_space_before_the_env():
    game = make_game("pendulum", 3, CPU, {})
    seen = []
    env_step = game.env.step
    game.env.step = lambda torques: seen.append(torques.clone()) or env_step(torques)
    game.reset(seed=0)
    game.step(torch.tensor([[[5.0]], [[-7.0]], [[0.5]]]))
    assert torch.equal(seen[0], torch.tensor([[2.0], [-2.0], [0.5]]))
    assert (
        game.action_nvec == ContinuousActions(1)
        and game.obs_dim == 3
        and game.episode_length == 200
    )


def test_collector_stores_the_unclipped_draws_and_their_log_probs():
    network = _network()
    with torch.no_grad():
        network.log_std.fill_(math.log(3.0))
    game = make_game("pendulum", 16, CPU, {})
    group = PolicyGroup("agent", PolicyConfig(), network, network, None, slice(0, 1), 1)
    collector = Collector(game, [group], 8, TorchSampler(0), PhaseTimer(CPU))
    collector.reset(seed=0)
    buf = collector.collect()["agent"]
    assert buf.actions.dtype == torch.float32 and buf.actions.abs().max() > 2.0
    logits, _ = network(buf.obs.reshape(-1, 3))
    torch.testing.assert_close(
        buf.log_probs.reshape(-1), log_prob(logits, buf.actions.reshape(-1, 1), game.action_nvec)
    )


def test_evaluator_plays_the_mean_as_a_float_torque():
    network = _network()
    with torch.no_grad():
        network.actor.weight.zero_()
        network.actor.bias.fill_(0.7)
    game = make_game("pendulum", 2, CPU, {"max_episode_steps": 5})
    group = PolicyGroup("agent", PolicyConfig(), network, network, None, slice(0, 1), 1)
    evaluator = Evaluator(game, [group], seed=0)
    result = evaluator.run()
    assert torch.equal(evaluator.actions, torch.full((2, 1, 1), 0.7))
    assert result["lengths"].tolist() == [5.0, 5.0]


SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "trainer.compile=false",
    "evaluation.eval_freq=0",
    "saving.model_params_save_freq=2",
    "saving.tag=example",  # a fixed folder name (the presets' is the start time)
]


def test_checkpoint_with_the_gaussian_head_resumes_weights_and_adam_state(tmp_path):
    from gpu_envs.trainers.fabric_loop import train

    base = [*SMALL, f"saving.basedir={tmp_path}"]
    train(
        RunConfig.from_dict(
            apply_overrides(preset("pendulum"), base + ["trainer.total_timesteps=128"])
        )
    )
    folder = tmp_path / "pendulum_ppo" / "example" / "ckpt"
    first = load_checkpoint(folder / "iteration_2.pth.tar")
    assert first["policies"]["agent"]["model"]["log_std"].shape == (1,)
    train(
        RunConfig.from_dict(
            apply_overrides(preset("pendulum"), base + ["trainer.total_timesteps=256"])
        ),
        resume=True,
    )
    state = load_checkpoint(folder / "iteration_4.pth.tar")
    adam_steps = {
        s["step"].item() for s in state["policies"]["agent"]["optimizer"]["state"].values()
    }
    assert adam_steps == {
        4 * 10 * 8
    }  # 4 iterations of 10 epochs x 8 minibatches: carried through the resume
    assert not torch.equal(
        state["policies"]["agent"]["model"]["log_std"],
        first["policies"]["agent"]["model"]["log_std"],
    )


def test_pendulum_preset_learns_to_the_stop_value(tmp_path):
    from gpu_envs.trainers.fabric_loop import train

    # the preset as shipped
    overrides = ["trainer.progress_bar=false", f"saving.basedir={tmp_path}"]
    summary = train(RunConfig.from_dict(apply_overrides(preset("pendulum"), overrides)))
    assert summary["best_eval"] >= -250.0
    assert summary["env_steps"] < 600_000  # stopped at the stop value, well before the budget
