"""Primitives whose implementation differs per target (CPU njit, CUDA, CUDA simulator).

Each primitive is a plain Python function (the semantics the CUDA simulator runs) plus an
``overload`` for the CPU target here; the CUDA overloads live in ``cuda_targets`` so that the CPU
path never imports numba-cuda. The step logic calls them from ``register_jitable`` functions.
"""

import math
import sys

import numpy as np
from numba import types
from numba.extending import overload

#: Step-logic functions declared with :func:`kernel_function`; ``cuda_targets`` registers them for CUDA.
KERNEL_FUNCTIONS: list = []


def kernel_function(fn):
    """Declare ``fn`` as step logic callable from the CPU drivers, CUDA kernels and the simulator.

    Like ``numba.extending.register_jitable``, but inlined into the caller on the CPU (where a call
    per env with a dozen array arguments costs more than the logic itself) and compiled as an
    ordinary device function on CUDA (where numba-cuda 0.30 cannot inline such overloads).
    """
    overload(fn, target="cpu", inline="always", strict=False)(lambda *args, **kwargs: fn)
    KERNEL_FUNCTIONS.append(fn)
    cuda_registry = sys.modules.get("gpu_envs.kernels.cuda_targets")
    if cuda_registry is not None:
        cuda_registry.register_kernel_function(fn)
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


def _fmod64_cpu(value, modulus):
    return lambda value, modulus: np.fmod(value, modulus)


def _atomic_add_cpu(array, index, value):
    # The CPU drivers give each env to a single thread, so a plain update cannot race.
    def impl(array, index, value):
        old = array[index]
        array[index] = old + value
        return old

    return impl


overload(cast_like, target="cpu", inline="always")(cast_like_typing)
overload(atomic_add, target="cpu", inline="always")(_atomic_add_cpu)
overload(fmod64, target="cpu", inline="always")(_fmod64_cpu)
