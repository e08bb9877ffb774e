"""Primitives whose implementation differs per target (CPU njit, CUDA, CUDA simulator).

Each primitive is a plain Python function with the semantics the CUDA simulator runs, plus an
``overload`` for the CPU target here; the CUDA overloads live in ``cuda_targets`` (which the CPU path
never imports) and are installed by :func:`gpu_envs.kernels.cuda_targets.register`. Step logic calls
them from :func:`kernel_function`\\ s. A game's logic sees one env's agents through
:func:`agent_start` / :func:`agent_stride` (CPU: every agent in turn; CUDA: one thread per agent of a
block), separates its phases with :func:`barrier`, and updates shared counters with :func:`atomic_add`.
"""

import math

import numpy as np
from numba import types
from numba.extending import overload

#: Every :func:`kernel_function`, in declaration order; ``cuda_targets.register`` compiles them for CUDA.
KERNEL_FUNCTIONS: list = []


def kernel_function(fn):
    """Declare ``fn`` as step logic callable from the CPU drivers, CUDA kernels and the simulator.

    Like ``numba.extending.register_jitable``, but inlined into the caller on the CPU (where a call
    per env with a dozen array arguments costs more than the logic itself) and compiled as an
    ordinary device function on CUDA (numba-cuda cannot inline such overloads).
    """
    overload(fn, target="cpu", inline="always", strict=False)(lambda *args, **kwargs: fn)
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
    from numba import cuda  # only the simulator runs this body: use its locked atomic

    return cuda.atomic.add(array, index, value)


def fmod64(value, modulus):
    """``math.fmod`` of two float64, exact on every target (njit lacks ``math.fmod``)."""
    return math.fmod(value, modulus)


def agent_start():
    """The first agent this worker handles in a phase: 0 on the CPU, the thread index on CUDA."""
    from numba import cuda

    return cuda.threadIdx.x


def agent_stride():
    """The step between the agents this worker handles: 1 on the CPU, the block size on CUDA."""
    from numba import cuda

    return cuda.blockDim.x


def barrier():
    """Wait until every worker of the env finished the phase: nothing on the CPU."""
    from numba import cuda

    cuda.syncthreads()


def env_rows(e, array, slot):
    """Env ``e``'s row of the [E, N] ``array`` for the phases: the row itself on the CPU; on CUDA a
    copy in slot ``slot`` of the block's shared memory (each worker copies its agents; the caller
    then calls :func:`barrier`)."""
    return array[e]


def store_env_rows(e, array, rows):
    """Write the rows :func:`env_rows` gave back to ``array[e]`` (nothing to do on the CPU)."""
    start, stride = agent_start(), agent_stride()
    for a in range(start, rows.shape[0], stride):
        array[e, a] = rows[a]


def _cpu_constant(value):
    return lambda *args: lambda *args: value


def _cpu_nothing(*args):
    return lambda *args: None


def _cpu_env_rows(e, array, slot):
    return lambda e, array, slot: array[e]


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
overload(agent_start, target="cpu", inline="always")(_cpu_constant(0))
overload(agent_stride, target="cpu", inline="always")(_cpu_constant(1))
overload(barrier, target="cpu", inline="always")(_cpu_nothing)
overload(env_rows, target="cpu", inline="always")(_cpu_env_rows)
overload(store_env_rows, target="cpu", inline="always")(_cpu_nothing)
