"""A process never runs more numba threads than it can use (gpu_envs.kernels.threads)."""

import json
import os
import subprocess
import sys

import numba
import pytest

from gpu_envs.kernels import threads

POOL = numba.config.NUMBA_NUM_THREADS
CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"GPU_ENVS_NUM_THREADS": "1"}, 1),
        ({"GPU_ENVS_NUM_THREADS": "1000", "LOCAL_WORLD_SIZE": "1000"}, POOL),
        ({"LOCAL_WORLD_SIZE": "1000"}, 1),
        ({"WORLD_SIZE": "1000"}, 1),
        ({"LOCAL_WORLD_SIZE": "1", "WORLD_SIZE": "1000"}, min(POOL, threads.usable_cpus())),
        ({"OMP_NUM_THREADS": "1"}, 1),
        ({"OMP_NUM_THREADS": "not a number", "WORLD_SIZE": ""}, min(POOL, threads.usable_cpus())),
    ],
)
def test_the_count_follows_the_override_the_processes_sharing_the_cpus_and_omp(environ, expected):
    assert threads.process_threads(environ) == expected


@pytest.mark.parametrize("given", ["0", "-2", "two", "1.5"])
def test_a_bad_override_is_refused_naming_the_variable(given):
    with pytest.raises(ValueError, match=r"GPU_ENVS_NUM_THREADS must be a positive integer"):
        threads.process_threads({"GPU_ENVS_NUM_THREADS": given})


def test_the_cgroup_quota_is_the_smallest_along_the_path_v2_and_v1(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "a" / "b" / "cpu.max").write_text("max 100000\n")
    assert threads.cgroup_cpu_quota(str(tmp_path), "0::/a/b\n") == 1.5
    assert threads.cgroup_cpu_quota(str(tmp_path), "0::/\n") is None
    v1 = tmp_path / "cpu,cpuacct" / "job"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads.cgroup_cpu_quota(str(tmp_path), "4:cpu,cpuacct:/job\n0::/\n") == 3.0
    assert threads.usable_cpus(str(tmp_path), "0::/a/b\n") == 1


# Run in a fresh process: numba is imported before the affinity changes (its pool's size is then
# fixed), then a 4096-env CartPole (the parallel loop's size) steps from two threads.
SCRIPT = """
import json, os, sys, threading
import numba, torch
import gpu_envs
from gpu_envs.kernels import threads
from gpu_envs.kernels.cpu import AdaptiveStep
cpus = json.loads(sys.argv[1])
os.sched_setaffinity(0, cpus)
env = gpu_envs.CartPoleVectorEnv(4096)
env.reset(seed=0)
env.step(torch.zeros(4096, dtype=torch.int64))
seen = {"count": threads.process_threads(), "parallel": isinstance(env._cpu_step[1], AdaptiveStep),
        "main": numba.get_num_threads()}
def other():
    env.step(torch.zeros(4096, dtype=torch.int64))
    seen["other"] = numba.get_num_threads()
thread = threading.Thread(target=other)
thread.start()
thread.join()
print(json.dumps(seen))
"""


def run_child(cpus: list[int], **environ: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("LOCAL_WORLD_SIZE", "WORLD_SIZE")}
    clean = {k: v for k, v in clean.items() if k not in ("OMP_NUM_THREADS", threads.OVERRIDE)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(cpus)],
        env={**clean, **environ},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


needs_two_cpus = pytest.mark.skipif(
    len(CPUS) < 2 or POOL < 2, reason="needs 2 CPUs and 2 numba threads"
)


@needs_two_cpus
def test_one_cpu_of_affinity_steps_the_serial_loop():
    assert run_child(CPUS[:1]) == {"count": 1, "parallel": False, "main": POOL, "other": POOL}


@needs_two_cpus
def test_two_ranks_on_two_cpus_step_the_serial_loop_each():
    seen = run_child(CPUS[:2], LOCAL_WORLD_SIZE="2")
    assert (seen["count"], seen["parallel"]) == (1, False)


@needs_two_cpus
def test_the_override_sets_the_count():
    seen = run_child(CPUS[:2], GPU_ENVS_NUM_THREADS="1")
    assert (seen["count"], seen["parallel"]) == (1, False)


@needs_two_cpus
def test_a_pool_larger_than_the_cpus_runs_as_many_threads_as_cpus_in_every_launching_thread():
    seen = run_child(CPUS[:2], NUMBA_NUM_THREADS="4")
    assert seen == {"count": 2, "parallel": True, "main": 2, "other": 2}
