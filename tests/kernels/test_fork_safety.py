"""A process that forks after a parallel kernel ran has a working child (SubprocVecEnv,
multiprocessing)."""

import multiprocessing

import numba
import pytest
import torch

from gpu_envs.games.cartpole import CartPoleVectorEnv


def _step_in_child(queue) -> None:
    env = CartPoleVectorEnv(8192)
    env.reset(seed=1)
    obs, *_ = env.step(torch.zeros(8192, dtype=torch.int64))
    queue.put(obs.shape[0])


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs a parallel region")
def test_fork_after_a_parallel_step_keeps_the_child_alive():
    env = CartPoleVectorEnv(8192)  # large enough for the parallel driver
    env.reset(seed=0)
    env.step(torch.zeros(8192, dtype=torch.int64))
    assert numba.threading_layer() in ("tbb", "workqueue"), numba.threading_layer()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_step_in_child, args=(queue,))
    child.start()
    child.join()  # pytest-timeout guards a hang
    assert child.exitcode == 0
    assert queue.get(timeout=5) == 8192
