"""Primitives whose implementation differs per target (CPU njit, CUDA, CUDA simulator).

Each primitive is a plain Python function (the semantics the CUDA simulator runs) plus an
``overload`` for the CPU target here; the CUDA overloads live in ``cuda_targets`` so that the CPU
path never imports numba-cuda. The step logic calls them from ``register_jitable`` functions.
"""

import numpy as np
from numba import types
from numba.extending import overload


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
    old = array[index]
    array[index] = old + value
    return old


def _atomic_add_cpu(array, index, value):
    # The CPU drivers give each env to a single thread, so a plain update cannot race.
    def impl(array, index, value):
        old = array[index]
        array[index] = old + value
        return old

    return impl


overload(cast_like, target="cpu", inline="always")(cast_like_typing)
overload(atomic_add, target="cpu", inline="always")(_atomic_add_cpu)
