"""CUDA overloads of the per-target primitives of ``targets``; imported by every CUDA kernel module."""

from numba import cuda
from numba.cuda.extending import overload

from gpu_envs.kernels.targets import atomic_add, cast_like, cast_like_typing


def _atomic_add_cuda(array, index, value):
    def impl(array, index, value):
        return cuda.atomic.add(array, index, value)

    return impl


overload(cast_like, target="cuda", inline="always")(cast_like_typing)
overload(atomic_add, target="cuda", inline="always")(_atomic_add_cuda)
