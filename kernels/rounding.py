"""Arithmetic rounded the same way on every target, where a last-bit difference would change a
discrete outcome (a neighbour order, a tag, a start state).

The CUDA compiler (NVVM) contracts ``a * b + c`` into one fused multiply-add (one rounding), while
the CPU backend and the CUDA simulator round the product and the sum separately. :func:`mul_rn` is
a product that is never fused: a plain multiply on the CPU and in the simulator; libdevice's
``__fmul_rn`` / ``__dmul_rn`` on CUDA (installed by ``cuda_targets.register``), which the compiler
keeps as its own correctly rounded ``mul.rn``. ``.ci/ptx_check.py`` asserts that the paths that use
it compile without contracted multiply-adds.
"""

import numpy as np
from numba.extending import overload

from gpu_envs.kernels.targets import same_float_types


def mul_rn(a, b):
    """``a * b`` rounded to nearest once, never fused with an addition; ``a`` and ``b`` are of one
    floating type (float32 or float64)."""
    if type(a) is not type(b) or not isinstance(a, (float, np.floating)):
        raise TypeError(f"mul_rn takes two floats of one type, got {type(a)} and {type(b)}")
    return a * b


def _mul_rn_cpu(a, b):
    if same_float_types(a, b):  # the CPU backend never contracts without fastmath
        return lambda a, b: a * b


overload(mul_rn, target="cpu", inline="always")(_mul_rn_cpu)
