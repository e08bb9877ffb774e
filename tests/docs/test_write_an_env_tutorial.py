"""docs/write-an-env.md works as written: its Python blocks up to "Train it", run in order as one
module, give a registered env that steps, autoresets in the three modes, is seeded, pickles, and
(under the CUDA simulator) runs the same bits on device="cuda" as on the CPU. Its "Train it"
section, run as a user runs it in fresh processes: the tutorial's game trains through
``register_game`` and through ``gpu-envs train`` with an entry point, and ``gpu-envs evaluate``
scores it."""

import importlib
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("stable_baselines3")  # the tutorial's SB3 section runs too

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "write-an-env.md"
ENV_ID = "tutorial/PointGoal-v0"
MODES = ["next_step", "same_step", "disabled"]
TRAIN_IT = "## 4. Train it"
#: A run of two iterations (16 envs x 16 steps), evaluated after each on 4 episodes.
TINY_RUN = [
    "trainer.num_envs=16",
    "trainer.train_batch_size=256",
    "trainer.total_timesteps=512",
    "trainer.compile=false",
    "trainer.progress_bar=false",
    "evaluation.eval_freq=1",
    "evaluation.num_episodes=4",
]
COMPILING = "compiling the CPU kernels of tutorial_point_goal (first run only"


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """The tutorial's code as an imported module (a real file, so numba can cache and inspect
    it)."""
    folder = tmp_path_factory.mktemp("tutorial")
    text = TUTORIAL.read_text("utf8")
    (folder / "write_an_env_tutorial.py").write_text(
        "\n".join(python_blocks(text[: text.index(TRAIN_IT)]))
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


def test_the_tutorial_env_takes_array_numpy_and_gymnasiums_numpy_wrappers(tutorial):
    """docs/using-with.md's promise, "every game takes array='numpy'", for a user's game
    registered as the page says: ``gym.make_vec`` gives the NumPy face (the torch face's values
    as NumPy arrays, the spec keeping ``array``), gymnasium's NumPy wrappers count its episodes,
    and a bad value is refused naming the choices."""
    import gymnasium.wrappers.vector as V
    import numpy as np

    numpy_env, torch_env = (
        make(4, array="numpy", max_episode_steps=15),
        make(4, max_episode_steps=15),
    )
    assert isinstance(numpy_env.unwrapped, tutorial.PointGoalVectorEnv)
    assert numpy_env.spec.kwargs["array"] == "numpy"
    np.testing.assert_array_equal(numpy_env.reset(seed=2)[0], torch_env.reset(seed=2)[0].numpy())
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        actions = torch.randint(0, 5, (4,), generator=generator)
        got, want = numpy_env.step(actions.numpy()), torch_env.step(actions)
        for array, tensor in zip(got[:4], want[:4]):
            assert isinstance(array, np.ndarray)
            np.testing.assert_array_equal(array, tensor.numpy())

    normalized = V.NormalizeObservation(make(4, array="numpy", max_episode_steps=15))
    wrapped = V.RecordEpisodeStatistics(V.DtypeObservation(normalized, np.float64))
    wrapped.reset(seed=0)
    wrapped.action_space.seed(0)
    episodes = 0
    for _ in range(40):
        obs, rewards, *_, info = wrapped.step(wrapped.action_space.sample())
        assert obs.dtype == np.float64 and isinstance(rewards, np.ndarray)
        episodes += int(info["_episode"].sum()) if "episode" in info else 0
    assert episodes >= 4, "40 steps of 15-step episodes end at least one per env"
    with pytest.raises(ValueError, match=r"array must be one of \('torch', 'numpy'\).*'jax'"):
        make(4, array="jax")


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


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A user's project as "Train it" lays it out: ``point_goal.py`` (the env's two blocks and
    the record), ``train_point_goal.py`` (the script) and, in ``site/``, the same ``point_goal.py``
    with an installed distribution's metadata declaring the page's entry point (what ``pip
    install`` of a pyproject.toml with it writes)."""
    text = TUTORIAL.read_text("utf8")
    env = python_blocks(text[: text.index("## 3. Use it")])
    record, script = python_blocks(text[text.index(TRAIN_IT) :])
    folder = tmp_path_factory.mktemp("project")
    module = "\n".join([*env, record])
    (folder / "point_goal.py").write_text(module)
    (folder / "train_point_goal.py").write_text(script)
    entry_point = re.search(
        r'\[project\.entry-points\."gpu_envs\.games"\]\n(.*?)\n```', text, flags=re.S
    ).group(1)
    dist_info = folder / "site" / "point_goal_tutorial-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (folder / "site" / "point_goal.py").write_text(module)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: point-goal-tutorial\nVersion: 0.1\n"
    )
    (dist_info / "entry_points.txt").write_text(
        "[gpu_envs.games]\n" + entry_point.replace('"', "") + "\n"
    )
    return folder


def run(command: list[str], cwd: Path, cache: Path, pythonpath: Path | None = None):
    """``command`` in a fresh process, numba's disk cache at ``cache``; its completed process."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_tutorial_game_trains_through_register_game_in_a_fresh_process(project, tmp_path):
    """The page's script, as ``python train_point_goal.py KEY=VALUE ...``: the game registered
    by the function trains, saves its checkpoints, and (library use) prints no compile notice,
    though its kernels compile (a cold cache)."""
    result = run(
        [sys.executable, "train_point_goal.py", *TINY_RUN, f"saving.basedir={tmp_path}"],
        project,
        tmp_path / "numba_cache",
    )
    folder = Path(re.search(r"experiment folder: (\S+),", result.stdout).group(1))
    assert folder.parent == tmp_path / "point_goal_ppo"
    assert (folder / "ckpt" / "ckpt_best.pth.tar").is_file()
    assert "gpu-envs train: point_goal on cpu" in result.stdout  # the run's banner: this game
    assert re.search(r"best greedy return: -?\d", result.stdout)
    assert "compiling" not in result.stdout + result.stderr


def test_gpu_envs_train_and_evaluate_take_the_tutorial_game_by_its_entry_point(project, tmp_path):
    """``gpu-envs train point_goal`` in a fresh process finds the game through the installed
    entry point (PYTHONPATH holds the distribution, as site-packages would), says once that the
    kernels compile on a cold cache, and ``gpu-envs evaluate point_goal`` scores its checkpoint
    against the record's threshold, silently on the now warm cache."""
    cache, site = tmp_path / "numba_cache", project / "site"
    train = run(
        [sys.executable, "-m", "gpu_envs.cli", "train", "point_goal", *TINY_RUN]
        + [f"saving.basedir={tmp_path}"],
        tmp_path,
        cache,
        site,
    )
    assert (train.stdout + train.stderr).count(COMPILING) == 1
    checkpoint = re.search(r"best checkpoint: (\S+)", train.stdout).group(1)
    assert Path(checkpoint).is_file() and "point_goal_ppo" in checkpoint
    evaluate = run(
        [sys.executable, "-m", "gpu_envs.cli", "evaluate", "point_goal", checkpoint]
        + ["--episodes", "3"],
        tmp_path,
        cache,
        site,
    )
    assert "3 greedy episodes on tutorial/PointGoal-v0 (the run's env)" in evaluate.stdout
    assert re.search(r"agent: mean return \S+ ± \S+ \(PointGoal target 0.8: ", evaluate.stdout)
    assert "compiling" not in evaluate.stdout + evaluate.stderr
