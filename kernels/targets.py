"""Primitives whose implementation differs per target (CPU njit, CUDA, CUDA simulator).

Each primitive is a plain Python function with the semantics the CUDA simulator runs, plus an
``overload`` for the CPU target here; the CUDA overloads live in ``cuda_targets`` (which the CPU
path
never imports) and are installed by :func:`gpu_envs.kernels.cuda_targets.register`. Step logic calls
them from :func:`kernel_function`\\ s. A game's logic sees one env's agents through
:func:`agent_start` / :func:`agent_stride` (CPU: every agent in turn; CUDA: one thread per agent of
a
block), separates its phases with :func:`barrier`, and updates shared counters with
:func:`atomic_add`.
"""

import math
import threading

import numpy as np
from numba import types
from numba.extending import overload

#: Every :func:`kernel_function`, in declaration order; ``cuda_targets.register`` compiles them for
#: CUDA.
KERNEL_FUNCTIONS: list = []


def kernel_function(fn=None, *, inline: bool = True):
    """Declare ``fn`` as step logic callable from the CPU drivers, CUDA kernels and the simulator.

    Like ``numba.extending.register_jitable``. On the CPU it is inlined into the caller (where a
    call per env with a dozen array arguments costs more than the logic itself), unless
    ``inline=False``: large pieces called from several places (a whole phase) compile once as a
    function of their own, which keeps compile times in seconds. On CUDA it is an ordinary device
    function (numba-cuda cannot inline such overloads).
    """
    if fn is None:
        return lambda function: kernel_function(function, inline=inline)
    options = {"inline": "always"} if inline else {}
    overload(fn, target="cpu", strict=False, **options)(lambda *args, **kwargs: fn)
    KERNEL_FUNCTIONS.append(fn)
    return fn


def cast_like(value, like):
    """Return the float64 ``value`` rounded to the floating type of ``like`` (float32 or float64).

    Math functions are evaluated in float64 on every target (the simulator does so anyway) and
    rounded afterwards, which keeps the CPU backend and the simulated CUDA kernels bit-identical.
    """
    return type(like)(value)


def cast_like_typing(value, like):
    """Overload body of :func:`cast_like`, shared by the CPU and CUDA targets."""
    if isinstance(like, types.Float) and like.bitwidth == 32:
        return lambda value, like: np.float32(value)
    return lambda value, like: np.float64(value)


def atomic_add(array, index, value):
    """``array[index] += value`` without lost updates between threads; returns the old value."""
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic  # the simulator's locked atomic

    return FakeCUDAAtomic().add(array, index, value)


def fmod64(value, modulus):
    """``math.fmod`` of two float64, exact on every target (njit lacks ``math.fmod``)."""
    return math.fmod(value, modulus)


# The Python bodies below run in the CUDA simulator, one Python thread per CUDA thread.
def agent_start():
    """The first agent this worker handles in a phase: 0 on the CPU, the thread index on CUDA."""
    return threading.current_thread().threadIdx.x


def agent_stride():
    """The step between the agents this worker handles: 1 on the CPU, the block size on CUDA."""
    return threading.current_thread()._manager._block_dim[0]


def barrier():
    """Wait until every worker of the env finished the phase: nothing on the CPU."""
    threading.current_thread().syncthreads()


def env_rows(row, slot):
    """An env's ``row`` of agents as the phases work on it: the row itself on the CPU; on CUDA a
    copy in slot ``slot`` of the block's shared memory (each worker copies its agents; the caller
    then calls :func:`barrier`)."""
    return row


def store_env_rows(row, rows):
    """Write back to ``row`` the ``rows`` that :func:`env_rows` gave (nothing to do on the CPU)."""
    for a in range(agent_start(), rows.shape[0], agent_stride()):
        row[a] = rows[a]


def _cpu_env_rows(row, slot):
    return lambda row, slot: row


def _fmod64_cpu(value, modulus):
    return lambda value, modulus: np.fmod(value, modulus)


def _atomic_add_cpu(array, index, value):
    # The CPU drivers give each env to a single worker, so a plain update cannot race.
    def impl(array, index, value):
        old = array[index]
        array[index] = old + value
        return old

    return impl


overload(cast_like, target="cpu", inline="always")(cast_like_typing)
overload(atomic_add, target="cpu", inline="always")(_atomic_add_cpu)
overload(fmod64, target="cpu", inline="always")(_fmod64_cpu)
overload(agent_start, target="cpu", inline="always")(lambda: lambda: 0)
overload(agent_stride, target="cpu", inline="always")(lambda: lambda: 1)
overload(barrier, target="cpu", inline="always")(lambda: lambda: None)
overload(env_rows, target="cpu", inline="always")(_cpu_env_rows)
overload(store_env_rows, target="cpu", inline="always")(lambda row, rows: lambda row, rows: None)
