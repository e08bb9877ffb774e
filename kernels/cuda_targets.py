"""CUDA overloads of the per-target primitives of ``targets``; imported by every CUDA kernel module."""

import math

from numba import cuda
from numba.cuda.extending import overload

from gpu_envs.kernels import targets
from gpu_envs.kernels.targets import atomic_add, cast_like, cast_like_typing, fmod64


def register_kernel_function(fn) -> None:
    """Make a :func:`targets.kernel_function` callable from CUDA kernels (a device function)."""
    overload(fn, target="cuda", strict=False)(lambda *args, **kwargs: fn)


def _fmod64_cuda(value, modulus):
    return lambda value, modulus: math.fmod(value, modulus)


def _atomic_add_cuda(array, index, value):
    def impl(array, index, value):
        return cuda.atomic.add(array, index, value)

    return impl


overload(cast_like, target="cuda", inline="always")(cast_like_typing)
overload(atomic_add, target="cuda", inline="always")(_atomic_add_cuda)
overload(fmod64, target="cuda", inline="always")(_fmod64_cuda)
for _fn in targets.KERNEL_FUNCTIONS:
    register_kernel_function(_fn)
