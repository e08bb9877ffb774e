"""Same seed => same trajectories, across runs, thread counts and batch sizes."""

import os
import subprocess
import sys

import numpy as np
import torch

import gpu_envs

TRAJECTORY_SCRIPT = """
import hashlib, numpy as np, torch, gpu_envs
env = gpu_envs.CartPoleVectorEnv(2048, autoreset_mode="same_step")  # parallel driver
obs, _ = env.reset(seed=123)
digest = hashlib.sha256(obs.numpy().tobytes())
actions = torch.from_numpy(np.random.default_rng(0).integers(0, 2, size=(120, 2048)))
for a in actions:
    obs, rew, term, trunc, info = env.step(a)
    for t in (obs, rew, term, trunc, info["final_obs"]):
        digest.update(t.numpy().tobytes())
print(digest.hexdigest())
"""


def run_trajectory(threads: int) -> str:
    environment = {**os.environ, "NUMBA_NUM_THREADS": str(threads)}
    result = subprocess.run(
        [sys.executable, "-c", TRAJECTORY_SCRIPT],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return result.stdout.strip()


def test_identical_for_one_and_two_threads_and_across_runs():
    one, two, two_again = run_trajectory(1), run_trajectory(2), run_trajectory(2)
    assert one == two == two_again


def rollout(num_envs: int, steps: int = 150) -> np.ndarray:
    env = gpu_envs.CartPoleVectorEnv(num_envs, max_episode_steps=25)
    env.reset(seed=7)
    states = [env.state[:3].clone()]
    for _ in range(steps):
        env.step(torch.ones(num_envs, dtype=torch.int64))
        states.append(env.state[:3].clone())
    return torch.stack(states).numpy()


def test_env_episodes_do_not_depend_on_num_envs():
    assert np.array_equal(rollout(3), rollout(1500))


def test_reseeding_restarts_the_same_episodes():
    env = gpu_envs.CartPoleVectorEnv(4)
    first, _ = env.reset(seed=42)
    env.step(torch.ones(4, dtype=torch.int64))
    again, _ = env.reset(seed=42)
    different, _ = env.reset()
    assert torch.equal(first, again) and not torch.equal(first, different)


DRIVER_CHOICE_SCRIPT = """
import numba, torch, gpu_envs
def threads_started():
    try:
        numba.threading_layer()
        return True
    except ValueError:
        return False
small = gpu_envs.CartPoleVectorEnv(16); small.reset(seed=0); small.step(torch.zeros(16,
dtype=torch.int64))
after_small = threads_started()
big = gpu_envs.CartPoleVectorEnv(8192); big.reset(seed=0); big.step(torch.zeros(8192,
dtype=torch.int64))
print(after_small, threads_started())
"""


def test_small_batches_run_serially_and_large_ones_in_parallel(tmp_path):
    """The serial and parallel drivers must not share a compile-cache entry (both from cold and
    warm)."""
    environment = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_NUM_THREADS": "2"}
    for _ in range(2):  # cold cache, then warm cache
        result = subprocess.run(
            [sys.executable, "-c", DRIVER_CHOICE_SCRIPT],
            env=environment,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        assert result.stdout.split() == ["False", "True"]


CACHE_STATS_SCRIPT = """
import torch, gpu_envs
for num_envs in (16, 8192):  # the serial and the parallel loop
    env = gpu_envs.CartPoleVectorEnv(num_envs)
    env.reset(seed=0)
    env.step(torch.zeros(num_envs, dtype=torch.int64))
driver = env._driver
for loop in (driver.step_serial, driver.step_parallel, driver.reset_loop):
    print(sum(loop.stats.cache_hits.values()), sum(loop.stats.cache_misses.values()))
"""


def test_a_new_process_loads_the_driver_loops_from_the_disk_cache(tmp_path):
    """The loops are compiled once; a later process only loads them (its first step is fast)."""
    environment = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_NUM_THREADS": "2"}
    counts = []
    for _ in range(2):  # cold cache, then warm cache
        result = subprocess.run(
            [sys.executable, "-c", CACHE_STATS_SCRIPT],
            env=environment,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        counts.append([line.split() for line in result.stdout.splitlines()])
    assert counts[0] == [["0", "1"]] * 3  # (hits, misses) of each loop: compiled
    assert counts[1] == [["1", "0"]] * 3  # loaded
