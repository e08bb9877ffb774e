"""Primitives whose implementation differs per target (CPU njit, CUDA, CUDA simulator).

Each primitive is a plain Python function with the semantics the CUDA simulator runs, plus an
``overload`` for the CPU target here; the CUDA overloads live in ``cuda_targets`` (which the CPU
path never imports) and are installed by :func:`gpu_envs.kernels.cuda_targets.register`. Step logic
calls them from :func:`kernel_function`\\ s. A game's logic sees one env's agents through
:func:`agent_start` / :func:`agent_stride` (CPU: every agent in turn; CUDA: one thread per agent of
a block), separates its phases with :func:`barrier`, and updates shared counters with
:func:`atomic_add`. Math (:func:`cos`, :func:`sin`, :func:`sqrt`, :func:`power`, :func:`fmod`) is
taken in the precision of its arguments, with typed constants from :func:`cast_like`.
"""

import functools
import math
import threading

import numba
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
    """Return ``value`` rounded to the floating type of ``like`` (float32 or float64).

    Typed constants: ``cast_like(c, x)`` is a constant ``c`` in the precision of ``x``, so that the
    arithmetic of a float32 state stays float32 (an untyped literal would widen it to float64).
    """
    return type(like)(value)


def cast_like_typing(value, like):
    """Overload body of :func:`cast_like`, shared by the CPU and CUDA targets."""
    if isinstance(like, types.Float) and like.bitwidth == 32:
        return lambda value, like: np.float32(value)
    return lambda value, like: np.float64(value)


# Math in the precision of the arguments (float32 or float64, all of one type): libm's
# ``cosf``/``cos``... on the CPU, libdevice's on CUDA. The simulator runs the CPU's compiled
# function (:func:`_on_cpu`), so that it stays bit-identical with the CPU backend.
def cos(x):
    """``cos(x)`` in the precision of ``x``."""
    return _on_cpu(cos, x)


def sin(x):
    """``sin(x)`` in the precision of ``x``."""
    return _on_cpu(sin, x)


def sqrt(x):
    """``sqrt(x)`` in the precision of ``x`` (correctly rounded on every target)."""
    return _on_cpu(sqrt, x)


def power(x, y):
    """``x ** y`` (libm's ``pow``/``powf``, libdevice's on CUDA) in the precision of ``x`` and
    ``y``."""
    return _on_cpu(power, x, y)


def fmod(value, modulus):
    """``math.fmod`` in the precision of its arguments; exact on every target."""
    return _on_cpu(fmod, value, modulus)


@functools.cache
def _compiled_on_cpu(primitive, arity: int):
    if arity == 1:
        return numba.njit(lambda x: primitive(x))
    return numba.njit(lambda x, y: primitive(x, y))


def _on_cpu(primitive, *args):
    """``primitive(*args)`` as the CPU backend computes it, in the type of ``args[0]``."""
    return type(args[0])(_compiled_on_cpu(primitive, len(args))(*args))


def same_float_types(*args) -> bool:
    """Whether the numba types ``args`` are one floating type (the math primitives' rule)."""
    return isinstance(args[0], types.Float) and all(arg == args[0] for arg in args)


def cos_typing(x):
    """Overload body of :func:`cos`, shared by the CPU and CUDA targets."""
    if same_float_types(x):
        return lambda x: math.cos(x)


def sin_typing(x):
    """Overload body of :func:`sin`, shared by the CPU and CUDA targets."""
    if same_float_types(x):
        return lambda x: math.sin(x)


def sqrt_typing(x):
    """Overload body of :func:`sqrt`, shared by the CPU and CUDA targets."""
    if same_float_types(x):
        return lambda x: math.sqrt(x)


def power_typing(x, y):
    """Overload body of :func:`power`, shared by the CPU and CUDA targets."""
    if same_float_types(x, y):
        return lambda x, y: math.pow(x, y)


def atomic_add(array, index, value):
    """``array[index] += value`` without lost updates between threads; returns the old value."""
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic  # the simulator's locked atomic

    return FakeCUDAAtomic().add(array, index, value)


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


def _fmod_cpu(value, modulus):
    if same_float_types(value, modulus):  # numba's CPU target has no math.fmod
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
overload(fmod, target="cpu", inline="always")(_fmod_cpu)
overload(cos, target="cpu", inline="always")(cos_typing)
overload(sin, target="cpu", inline="always")(sin_typing)
overload(sqrt, target="cpu", inline="always")(sqrt_typing)
overload(power, target="cpu", inline="always")(power_typing)
overload(agent_start, target="cpu", inline="always")(lambda: lambda: 0)
overload(agent_stride, target="cpu", inline="always")(lambda: lambda: 1)
overload(barrier, target="cpu", inline="always")(lambda: lambda: None)
overload(env_rows, target="cpu", inline="always")(_cpu_env_rows)
overload(store_env_rows, target="cpu", inline="always")(lambda row, rows: lambda row, rows: None)
