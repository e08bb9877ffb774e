"""Processes starting one game at once on a cold numba cache compile its kernels once: the first
compiles and saves, the others wait on the lock beside the cache index and load what it saved
(:mod:`gpu_envs.kernels.compile_lock`). Real processes, as AsyncVectorEnv, Ray or DDP start them;
numba's cache log (``NUMBA_DEBUG_CACHE=1``) says which process saved and which loaded."""

import os
import subprocess
import sys
import time

import pytest

#: Waits for ``go`` (all processes import first, then build the env together), then takes
#: CartPole's first reset and step and prints the step's bytes.
WORKER = """
import pathlib, sys, time
import gymnasium as gym
import gpu_envs

pathlib.Path(sys.argv[1]).touch()
while not pathlib.Path(sys.argv[2]).exists():
    time.sleep(0.01)
env = gym.make("gpu_envs/CartPole-v1")
env.reset(seed=0)
obs, reward, terminated, truncated, _ = env.step(0)
print("first step", obs.tobytes().hex(), reward, terminated, truncated)
"""


def start_at_once(tmp_path, count: int) -> list[str]:
    """``count`` WORKER processes on a fresh cache, released together; their stdouts."""
    environment = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
        "NUMBA_DEBUG_CACHE": "1",
    }
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(count)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        for path in ready
    ]
    while not all(path.exists() for path in ready):
        assert all(p.poll() is None for p in processes), processes[0].communicate()[1]
        time.sleep(0.05)
    go.touch()
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        outputs.append(out)
    return outputs


def lines(output: str, start: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(start)]


@pytest.mark.slow
def test_processes_starting_cartpole_at_once_compile_its_kernels_once(tmp_path):
    outputs = start_at_once(tmp_path, 3)
    saves = [lines(out, "[cache] data saved to") for out in outputs]
    savers = [i for i, saved in enumerate(saves) if saved]
    assert len(savers) == 1, f"processes {savers} compiled and saved the kernels"
    (saved,) = (saves[i] for i in savers)
    assert len(saved) == len(set(saved)) >= 3  # the reset and step loops and the logic, once
    for i, out in enumerate(outputs):
        if i not in savers:  # the others loaded the loops (their logic is linked in)
            assert len(lines(out, "[cache] data loaded from")) >= 2
    first_steps = {line for out in outputs for line in lines(out, "first step")}
    assert len(first_steps) == 1, first_steps  # bit for bit the same


HOLD = """
import fcntl, os, sys, time
import numba
import jitted_module
from gpu_envs.kernels.compile_lock import lock_path

lock = os.open(lock_path(jitted_module.add_one, (numba.int64,)), os.O_RDWR | os.O_CREAT)
fcntl.flock(lock, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""

CALL = """
import time
import numba
import jitted_module

numba.njit(lambda x: x)(1)  # (numba's start-up first: the call below then compiles at once)
print("calling", flush=True)
result = jitted_module.add_one(41)
print(time.time(), result, dict(jitted_module.add_one.stats.cache_misses), flush=True)
"""

JITTED = """
import numba
from gpu_envs.kernels.compile_lock import compile_once

@compile_once
@numba.njit(cache=True)
def add_one(x):
    return x + 1
"""


def test_a_process_killed_while_compiling_lets_a_waiting_one_compile(tmp_path):
    """The waiter waits while the lock's holder lives; killed (its compile lost), the holder's
    lock goes with it and the waiter compiles."""
    (tmp_path / "jitted_module.py").write_text(JITTED)
    environment = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
    }

    def start(code: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=environment
        )

    holder = start(HOLD)
    assert holder.stdout.readline() == "held\n"
    waiter = start(CALL)
    try:
        assert waiter.stdout.readline() == "calling\n"
        time.sleep(2.0)
    finally:
        killed = time.time()
        holder.kill()
        holder.wait()
    out, _ = waiter.communicate(timeout=120)
    finished, result = out.split(" ", 1)
    assert float(finished) > killed, "compiled while another process held the lock"
    assert result == "42 {(int64,): 1}\n"
