"""Primitives whose implementation differs per target (CPU njit, CUDA, CUDA simulator).

Each primitive is a plain Python function (the semantics the CUDA simulator runs) plus an
``overload`` for the CPU target and one for the CUDA target, so the step logic can call it from a
``register_jitable`` function and compile for either target.
"""

import numpy as np
from numba import cuda, types
from numba.cuda.extending import overload as cuda_overload
from numba.extending import overload


def cast_like(value, like):
    """Return the float64 ``value`` rounded to the floating type of ``like`` (float32 or float64).

    Math functions are evaluated in float64 on every target (the simulator does so anyway) and
    rounded afterwards, which keeps the CPU backend and the simulated CUDA kernels bit-identical.
    """
    return type(like)(value)


def _cast_like_impl(value, like):
    if isinstance(like, types.Float) and like.bitwidth == 32:
        return lambda value, like: np.float32(value)
    return lambda value, like: np.float64(value)


overload(cast_like, target="cpu", inline="always")(_cast_like_impl)
cuda_overload(cast_like, target="cuda", inline="always")(_cast_like_impl)


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


def _atomic_add_cuda(array, index, value):
    def impl(array, index, value):
        return cuda.atomic.add(array, index, value)

    return impl


overload(atomic_add, target="cpu", inline="always")(_atomic_add_cpu)
cuda_overload(atomic_add, target="cuda", inline="always")(_atomic_add_cuda)
