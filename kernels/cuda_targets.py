"""CUDA overloads of the per-target primitives of ``targets``.

:func:`register` installs them, and compiles every ``targets.kernel_function`` for CUDA as a device
function; the CUDA driver factories call it before building a kernel. Nothing happens at import.
"""

import math

from numba import cuda, types
from numba.cuda import libdevice
from numba.cuda.extending import overload

from gpu_envs.kernels import rounding, targets

#: Bytes of dynamic shared memory each :func:`targets.env_rows` slot takes per agent.
SHARED_BYTES_PER_AGENT_SLOT = 4

_registered: set = set()


def register() -> None:
    """Install the CUDA overloads of the primitives and of every kernel function declared so far."""
    if not _registered:
        for primitive, implementation, inline in _PRIMITIVES:
            overload(primitive, target="cuda", inline=inline)(implementation)
    for fn in targets.KERNEL_FUNCTIONS:
        if fn not in _registered:
            overload(fn, target="cuda", strict=False)(lambda *args, _fn=fn, **kwargs: _fn)
            _registered.add(fn)
    _registered.add(register)


def _fmod(value, modulus):
    if targets.same_float_types(value, modulus):
        return lambda value, modulus: math.fmod(value, modulus)


def _mul_rn(a, b):
    # libdevice's round-to-nearest products: NVVM never fuses them into an FMA
    if targets.same_float_types(a, b) and a.bitwidth == 32:
        return lambda a, b: libdevice.fmul_rn(a, b)
    if targets.same_float_types(a, b):
        return lambda a, b: libdevice.dmul_rn(a, b)


def _atomic_add(array, index, value):
    return lambda array, index, value: cuda.atomic.add(array, index, value)


def _agent_start():
    return lambda: cuda.threadIdx.x


def _agent_stride():
    return lambda: cuda.blockDim.x


def _barrier():
    return lambda: cuda.syncthreads()


def _env_rows(row, slot):
    dtype = row.dtype
    # Each slot holds 4 bytes per agent: one element of a 4-byte dtype, the first of four of a bool.
    elements_per_agent = SHARED_BYTES_PER_AGENT_SLOT // (
        1 if isinstance(dtype, types.Boolean) else 4
    )

    def impl(row, slot):
        n = row.shape[0]
        shared = cuda.shared.array(0, dtype=dtype)
        offset = slot * n * elements_per_agent
        rows = shared[offset : offset + n]
        for a in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            rows[a] = row[a]
        return rows

    return impl


def _store_env_rows(row, rows):
    def impl(row, rows):
        for a in range(cuda.threadIdx.x, rows.shape[0], cuda.blockDim.x):
            row[a] = rows[a]

    return impl


_PRIMITIVES = (
    (targets.cast_like, targets.cast_like_typing, "always"),
    (targets.atomic_add, _atomic_add, "always"),
    (targets.fmod, _fmod, "always"),
    (targets.cos, targets.cos_typing, "always"),
    (targets.sin, targets.sin_typing, "always"),
    (targets.sqrt, targets.sqrt_typing, "always"),
    (targets.power, targets.power_typing, "always"),
    (rounding.mul_rn, _mul_rn, "always"),
    (targets.agent_start, _agent_start, "always"),
    (targets.agent_stride, _agent_stride, "always"),
    (targets.barrier, _barrier, "always"),
    (targets.env_rows, _env_rows, "always"),
    (targets.store_env_rows, _store_env_rows, "always"),
)
