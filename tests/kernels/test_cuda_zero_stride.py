"""The prepared launch packs a broadcast (zero-stride) device array with its own strides, as
numba-cuda's launch does: numba-cuda's ``__cuda_array_interface__`` leaves the strides out of an
array it calls contiguous "ignoring broadcasted dimensions", and C strides in their place would
make the kernel read past the one element of a zero-stride constant. No GPU: a device array with
numba-cuda's own contiguity rule for its interface."""

import ctypes

import numpy as np
import pytest
from numba import config
from numba.core import types

from gpu_envs.kernels import cuda as drivers

pytestmark = pytest.mark.skipif(
    bool(config.ENABLE_CUDASIM), reason="numba-cuda's device arrays (not the simulator's)"
)


class DeviceArray:
    """numba-cuda's ``DeviceNDArray`` as the prepared launch sees it: shape, strides, dtype and
    the interface its ``is_contiguous`` decides."""

    def __init__(self, shape: tuple, strides: tuple, dtype):
        from numba.cuda.cudadrv.devicearray import is_contiguous

        self.shape, self.strides, self.dtype = shape, strides, np.dtype(dtype)
        self.__cuda_array_interface__ = {
            "shape": shape,
            "strides": None if is_contiguous(self) else strides,
            "data": (0x1000, False),
            "typestr": self.dtype.str,
            "version": 3,
        }


@pytest.mark.parametrize(
    ("shape", "strides"), [((4,), (0,)), ((3, 4), (0, 8)), ((3, 4), (32, 8)), ((2, 1), (8, 0))]
)
def test_an_array_is_packed_with_the_strides_it_has(shape, strides):
    array = DeviceArray(shape, strides, np.float64)
    parameters: list = []
    drivers.pack(types.Array(types.float64, len(shape), "A"), array, parameters)
    packed = [p.value for p in parameters if isinstance(p, ctypes.c_ssize_t)]
    assert packed[-len(strides) :] == list(strides)


def test_an_interface_without_strides_and_no_strides_of_its_own_is_c_contiguous():
    class Interface:
        __cuda_array_interface__ = {
            "shape": (3, 4),
            "strides": None,
            "data": (0x1000, False),
            "typestr": "<f4",
            "version": 3,
        }

    parameters: list = []
    drivers.pack(types.Array(types.float32, 2, "C"), Interface(), parameters)
    assert [p.value for p in parameters[-2:]] == [16, 4]
