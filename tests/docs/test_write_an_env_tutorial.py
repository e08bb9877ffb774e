"""docs/write-an-env.md works as written: its Python blocks, run in order as one module, give a
registered env that steps, autoresets in the three modes, is seeded, pickles, and (under the CUDA
simulator) runs the same bits on device="cuda" as on the CPU."""

import importlib
import pickle
import re
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("stable_baselines3")  # the tutorial's SB3 section runs too

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "write-an-env.md"
ENV_ID = "tutorial/PointGoal-v0"
MODES = ["next_step", "same_step", "disabled"]


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """The tutorial's code as an imported module (a real file, so numba can cache and inspect
    it)."""
    folder = tmp_path_factory.mktemp("tutorial")
    (folder / "write_an_env_tutorial.py").write_text(
        "\n".join(python_blocks(TUTORIAL.read_text("utf8")))
    )
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("write_an_env_tutorial")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("write_an_env_tutorial", None)


def make(num_envs: int, device: str = "cpu", **kwargs):
    import gymnasium as gym

    return gym.make_vec(ENV_ID, num_envs=num_envs, device=device, **kwargs)


def greedy_actions(obs: torch.Tensor) -> torch.Tensor:
    """Push along the axis where the goal is farthest (actions 1..4: left, right, down, up)."""
    offset = obs[:, 4:6]
    axis = offset.abs().argmax(dim=1)
    positive = offset.gather(1, axis[:, None])[:, 0] > 0
    return (1 + 2 * axis + positive.long()).to(torch.int64)


def test_title_counts_the_lines_of_the_env():
    text = TUTORIAL.read_text("utf8")
    env_blocks = python_blocks(text[: text.index("## 3. Use it")])
    lines = sum(1 for block in env_blocks for line in block.splitlines() if line.strip())
    assert int(re.match(r"# Your own env in (\d+) lines", text).group(1)) == lines


def test_make_vec_steps_with_outputs_of_the_declared_shapes(tutorial):
    envs = make(16)
    assert isinstance(envs, tutorial.PointGoalVectorEnv) and envs.max_episode_steps == 200
    obs, _ = envs.reset(seed=3)
    assert obs.shape == (16, 6) and obs.dtype == torch.float32
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        obs, rewards, terminated, truncated, _ = envs.step(
            torch.randint(0, 5, (16,), generator=generator)
        )
        assert obs.shape == (16, 6) and obs.dtype == torch.float32 and torch.isfinite(obs).all()
        assert (
            rewards.shape == (16,)
            and rewards.dtype == torch.float32
            and torch.isfinite(rewards).all()
        )
        assert (
            terminated.dtype == truncated.dtype == torch.bool
            and terminated.shape == truncated.shape == (16,)
        )
        assert obs[:, :2].abs().max() <= 1.0  # positions stay on the table
        assert envs.observation_space.contains(obs.numpy())


def test_greedy_agent_reaches_goals_and_gets_the_goal_reward(tutorial):
    envs = make(32)
    obs, _ = envs.reset(seed=11)
    reached = 0
    for _ in range(100):
        obs, rewards, terminated, _, _ = envs.step(greedy_actions(obs))
        assert torch.equal(rewards[terminated], torch.ones(int(terminated.sum())))
        reached += int(terminated.sum())
    assert reached >= 32, "a greedy agent must reach most goals within 100 steps"


@pytest.mark.parametrize("mode", MODES)
def test_an_episode_ends_and_the_next_one_starts(tutorial, mode):
    envs = tutorial.PointGoalVectorEnv(4, autoreset_mode=mode, max_episode_steps=6)
    first_obs, _ = envs.reset(seed=0)
    stay = torch.zeros(4, dtype=torch.int64)  # at rest, "stay" keeps every env where it started
    for _ in range(5):
        assert not envs.step(stay)[3].any()
    obs, rewards, terminated, truncated, info = envs.step(stay)
    assert (
        truncated.all() and not terminated.any() and torch.equal(rewards, torch.full((4,), -0.01))
    )
    if mode == "next_step":
        assert torch.equal(obs, first_obs)
        obs, rewards, terminated, truncated, _ = envs.step(stay)
        assert not (terminated | truncated).any() and torch.equal(rewards, torch.zeros(4))
    elif mode == "same_step":
        assert info["_final_obs"].all() and torch.equal(info["final_obs"], first_obs)
    else:
        with pytest.raises(RuntimeError, match="not reset"):
            envs.step(stay)
        obs, _ = envs.reset(options={"reset_mask": torch.tensor([True, False, True, False])})
    restarted = [0, 2] if mode == "disabled" else [0, 1, 2, 3]
    assert torch.equal(obs[restarted, 2:4], torch.zeros(len(restarted), 2)), (
        "a new episode starts at rest"
    )
    assert not torch.equal(obs[restarted], first_obs[restarted]), "a new episode draws a new start"
    assert envs.state_snapshot()["episode"][restarted].eq(2).all()


def rollout(envs, steps: int, seed: int = 0) -> list[torch.Tensor]:
    """Every output of ``steps`` random steps (the actions drawn from ``seed``)."""
    generator = torch.Generator().manual_seed(seed)
    outputs = []
    for _ in range(steps):
        outputs.extend(envs.step(torch.randint(0, 5, (envs.num_envs,), generator=generator))[:4])
    return outputs


def test_same_seed_same_episodes_other_seed_other_episodes(tutorial):
    first, second, other = (
        make(8, max_episode_steps=15),
        make(8, max_episode_steps=15),
        make(8, max_episode_steps=15),
    )
    first.reset(seed=5), second.reset(seed=5), other.reset(seed=6)
    a, b, c = rollout(first, 60), rollout(second, 60), rollout(other, 60)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))


def test_a_pickled_copy_steps_on_like_the_original(tutorial):
    envs = make(8, max_episode_steps=15)
    envs.reset(seed=9)
    rollout(envs, 20)
    copy = pickle.loads(pickle.dumps(envs))
    assert all(
        torch.equal(x, y) for x, y in zip(rollout(envs, 40, seed=1), rollout(copy, 40, seed=1))
    )


@pytest.mark.cudasim
@pytest.mark.parametrize("mode", MODES)
def test_cuda_env_equals_cpu_env_bit_for_bit(tutorial, mode):
    from gpu_envs.engine import devices

    if not devices.simulated_cuda():
        pytest.skip("bit-exact only in the simulator: a GPU fuses multiply-adds")
    cpu, gpu = (
        make(37, device, max_episode_steps=9, autoreset_mode=mode) for device in ("cpu", "cuda")
    )
    assert gpu.kernel_target == "cuda" and cpu.kernel_target == "cpu"
    assert torch.equal(cpu.reset(seed=21)[0], gpu.reset(seed=21)[0])
    generator = torch.Generator().manual_seed(2)
    for step in range(30):
        actions = torch.randint(0, 5, (37,), generator=generator)
        out_cpu, out_gpu = cpu.step(actions), gpu.step(actions)
        assert all(torch.equal(x, y) for x, y in zip(out_cpu[:4], out_gpu[:4])), f"step {step}"
        assert all(torch.equal(out_cpu[4][key], out_gpu[4][key]) for key in out_cpu[4])
        snapshot_cpu, snapshot_gpu = cpu.state_snapshot(), gpu.state_snapshot()
        assert all(torch.equal(snapshot_cpu[name], snapshot_gpu[name]) for name in snapshot_cpu), (
            f"step {step}"
        )
        if mode == "disabled" and snapshot_cpu["needs_reset"].any():
            mask = snapshot_cpu["needs_reset"]
            assert torch.equal(
                cpu.reset(options={"reset_mask": mask})[0],
                gpu.reset(options={"reset_mask": mask})[0],
            )
    assert int(cpu.state_snapshot()["episode"].max()) >= 3, "the run must cross episode ends"


def test_kernel_args_that_do_not_match_the_buffers_are_refused(tutorial):
    """A ``KernelArgs`` whose fields are not the buffers, ``actions``, then one per constant and
    setting is a TypeError naming the fields, before any kernel reads a wrong argument."""
    import collections
    from types import SimpleNamespace

    fields = list(tutorial.KernelArgs._fields)
    swapped = fields[:]
    swapped[0], swapped[1] = swapped[1], swapped[0]
    for bad in (swapped, fields[:-1]):

        class Mismatched(tutorial.PointGoalVectorEnv):
            logic = SimpleNamespace(
                step_envs=tutorial.step_envs,
                reset_envs=tutorial.reset_envs,
                KernelArgs=collections.namedtuple("Mismatched", bad),
            )

        with pytest.raises(TypeError, match="KernelArgs has the fields"):
            Mismatched(2)
