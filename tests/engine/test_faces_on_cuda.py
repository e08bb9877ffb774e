"""Every face of the envs on the simulated CUDA device, bit for bit against the CPU backend.

``device="cuda"`` under ``NUMBA_ENABLE_CUDASIM=1`` (set before Python starts) runs the CUDA kernels
in numba's simulator on CPU tensors, through the engine's CUDA branch: the persistent action buffer
and its kernel view, the outputs copied out of the device buffers, launches and constant copies on
the launch stream, the uint64 views of the seed and episode counters, and the validation of the
inputs. Here that branch is driven through the faces users call (``gym.make_vec``, the PettingZoo
module's batched env, the SB3 and TorchRL adapters, the Fabric trainer) with the same seeds and
actions as a CPU env, and every output must be the CPU env's, bit for bit: the simulator evaluates
the same Python as the CPU kernels. On a real GPU floats are compared within a tolerance (FMA
contraction, libdevice; see docs/cuda.md).
"""

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_envs
from gpu_envs import tag_v0
from gpu_envs.engine.kernel_env import KernelEnv
from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.pendulum import PendulumVectorEnv

pytestmark = pytest.mark.cudasim

#: A Tag small enough for the simulator, whose games see tags and ends within a few steps.
TAG = dict(
    num_taggers=2,
    num_runners=3,
    grid_length=1.5,
    episode_length=4,
    tagging_distance=0.4,
    num_other_agents_observed=2,
)
#: The first seed puts the envs' seeds just below 2**63: the uint64 counters' high bits are used.
SEEDS = (2**63 - 16, 7)
#: id -> (num_envs, make_vec keywords): horizons short enough that every env resets within
#: :data:`STEPS` steps. CartPole runs in float32 (the GPU default), Pendulum in float64.
GAMES = {
    "gpu_envs/CartPole-v1": (4, {"dtype": torch.float32, "max_episode_steps": 3}),
    "gpu_envs/Pendulum-v1": (3, {"dtype": torch.float64, "max_episode_steps": 3}),
    "gpu_envs/Tag-v0": (2, TAG),
}
STEPS = 7


def sample_actions(rng: np.random.Generator, space: gym.Space, batch: tuple[int, ...]):
    """Valid NumPy actions of the single ``space`` for a ``batch`` of rows."""
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, int(space.n), size=batch)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return rng.integers(0, space.nvec, size=(*batch, *space.shape))
    return rng.uniform(space.low, space.high, size=(*batch, *space.shape)).astype(np.float32)


def kernel_env(env) -> KernelEnv:
    """The engine env under a face (Tag's gymnasium face keeps it as ``game_env``)."""
    env = getattr(env, "unwrapped", env)
    return env.game_env if hasattr(env, "game_env") else env


@pytest.fixture
def assert_same(assert_matches_cpu):
    """Compare nested outputs (tuples, lists, dicts, tensors, arrays, scalars) of a CPU face with
    the simulated device's: tensors and arrays through ``assert_matches_cpu``."""

    def compare(expected, actual, what: str) -> None:
        if isinstance(expected, dict):
            assert set(expected) == set(actual), f"{what}: keys differ"
            for key in expected:
                compare(expected[key], actual[key], f"{what}[{key!r}]")
        elif isinstance(expected, (tuple, list)):
            assert len(expected) == len(actual), f"{what}: lengths differ"
            for i, (a, b) in enumerate(zip(expected, actual)):
                compare(a, b, f"{what}[{i}]")
        elif isinstance(expected, (torch.Tensor, np.ndarray)):
            assert type(expected) is type(actual), f"{what}: {type(actual)} not {type(expected)}"
            assert_matches_cpu(torch.as_tensor(expected), torch.as_tensor(actual), what)
        else:
            assert expected == actual, f"{what}: {actual!r} != {expected!r}"

    return compare


def assert_states_match(cpu_env, sim_env, assert_envs_match) -> None:
    cpu, sim = kernel_env(cpu_env), kernel_env(sim_env)
    assert cpu.kernel_target == "cpu" and sim.kernel_target == "cuda"
    assert_envs_match(cpu, sim, "the end")


def pairs(make):
    """``make(device)`` on the CPU and on the simulated CUDA device."""
    return make("cpu"), make("cuda")


@pytest.mark.parametrize("env_id", list(GAMES))
def test_gymnasium_make_vec(env_id, assert_same, assert_envs_match):
    num_envs, kwargs = GAMES[env_id]
    envs = pairs(lambda device: gym.make_vec(env_id, num_envs=num_envs, device=device, **kwargs))
    outputs = [env.reset(seed=SEEDS[0]) for env in envs]
    assert_same(*outputs, "reset")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        actions = sample_actions(rng, envs[0].single_action_space, (envs[0].num_envs,))
        # NumPy actions, then a tensor: the host input and the device-tensor input.
        actions = actions if step % 2 else torch.from_numpy(actions)
        assert_same(*(env.step(actions) for env in envs), f"step {step}")
    assert_states_match(*envs, assert_envs_match)
    assert int(kernel_env(envs[0]).state_snapshot()["episode"].max()) >= 1, "resets exercised"


def test_pettingzoo_module(assert_same, assert_envs_match):
    """``parallel_env`` is one game on the CPU and takes no device; the module's batched entry
    ``vector_env(num_envs, device)`` is the one a GPU serves."""
    with pytest.raises(TypeError, match="vector_env"):
        tag_v0.parallel_env(device="cuda", **TAG)
    envs = pairs(lambda device: tag_v0.vector_env(3, device, **TAG))
    assert_same(*(env.reset(seed=SEEDS[1]) for env in envs), "reset")
    rng = np.random.default_rng(1)
    for step in range(STEPS):
        actions = sample_actions(rng, envs[0].single_action_space, (3, envs[0].num_agents))
        assert_same(*(env.step(torch.from_numpy(actions)) for env in envs), f"step {step}")
    assert_states_match(*envs, assert_envs_match)


@pytest.mark.parametrize("env_id", list(GAMES))
def test_sb3_vec_env(env_id, assert_same, assert_envs_match):
    from gpu_envs.adapters.sb3 import make_sb3_vec_env

    num_envs, kwargs = GAMES[env_id]
    venvs = pairs(lambda device: make_sb3_vec_env(env_id, num_envs, device=device, **kwargs))
    for venv in venvs:
        venv.seed(SEEDS[1])
    assert_same(*(venv.reset() for venv in venvs), "reset")
    rng = np.random.default_rng(2)
    for step in range(STEPS):
        actions = sample_actions(rng, venvs[0].action_space, (venvs[0].num_envs,))
        for venv in venvs:
            venv.step_async(actions)
        assert_same(*(venv.step_wait() for venv in venvs), f"step {step}")
    assert_states_match(*(venv.env for venv in venvs), assert_envs_match)


TORCHRL = {
    "cartpole": lambda device: _torchrl().CartPoleTorchRLEnv(
        4, device, dtype=torch.float32, max_episode_steps=3
    ),
    "pendulum": lambda device: _torchrl().KernelTorchRLEnv(
        PendulumVectorEnv(3, device, max_episode_steps=3, autoreset_mode="disabled")
    ),
    "tag": lambda device: _torchrl().TagTorchRLEnv(2, device, **TAG),
}


def _torchrl():
    from gpu_envs.adapters import torchrl as torchrl_envs

    return torchrl_envs


@pytest.mark.parametrize("game", list(TORCHRL))
def test_torchrl_env_rollout(game, assert_same, assert_envs_match):
    """A rollout through TorchRL's partial resets (DISABLED autoreset, actions validated)."""
    rollouts, envs = [], pairs(TORCHRL[game])
    for env in envs:
        assert env.batched_env.validate_actions
        env.set_seed(SEEDS[0])
        torch.manual_seed(3)  # the random policy draws the same actions for both
        rollouts.append(env.rollout(STEPS, break_when_any_done=False))
    expected, actual = (dict(r.items(include_nested=True, leaves_only=True)) for r in rollouts)
    assert_same(expected, actual, "rollout")
    assert_states_match(*(env.batched_env for env in envs), assert_envs_match)
    assert bool(rollouts[0]["next", "done"].any()), "the rollout must cross a reset"


class _SimulatedCartPole(CartPoleVectorEnv):
    """CartPole on the simulated CUDA device whatever device the trainer asks for."""

    def __init__(self, num_envs, device, **kwargs):
        super().__init__(num_envs, "cuda", **kwargs)


def _trained_weights(tmp_path, name: str) -> dict[str, torch.Tensor]:
    from gpu_envs.runs.config import RunConfig, apply_overrides
    from gpu_envs.runs.presets import preset
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric

    overrides = [
        "trainer.accelerator=cpu",
        "trainer.num_envs=4",
        "trainer.train_batch_size=24",  # 6 steps per iteration: episodes end within it
        "trainer.total_timesteps=48",
        "trainer.progress_bar=false",
        "trainer.compile=false",
        "env.max_episode_steps=5",
        "evaluation.eval_freq=0",
        "policy.agent.model.fc_dims=[8]",
        f"saving.basedir={tmp_path / name}",
    ]
    config = RunConfig.from_dict(apply_overrides(preset("cartpole"), overrides))
    trainer = Trainer(make_fabric(config), config)
    trainer.fit()
    assert trainer.iteration == 2
    assert kernel_env(trainer.game.env).kernel_target == name
    return {
        f"{group.tag}.{key}": value.detach().clone()
        for group in trainer.groups
        for key, value in group.module.state_dict().items()
    }


def test_fabric_trainer_iterations(tmp_path, monkeypatch, assert_same):
    """Two PPO iterations with CartPole on the simulated device (Fabric on the CPU) end with the
    CPU run's weights. The trainer places its envs on Fabric's device and has no option for
    another, so here the env class is swapped for one that asks for ``"cuda"``."""
    expected = _trained_weights(tmp_path, "cpu")
    monkeypatch.setattr(gpu_envs.games.cartpole, "CartPoleVectorEnv", _SimulatedCartPole)
    assert_same(expected, _trained_weights(tmp_path, "cuda"), "weights")
