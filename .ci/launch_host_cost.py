"""Host work per step of the prepared CUDA launch (``kernels/cuda.py``), timed without a GPU.

The kernel arguments are those of real CartPole (float32, the GPU's default) and Tag (seed
config) envs, built on the CPU and handed over as device arrays of the same shapes, dtypes and
strides (``__cuda_array_interface__`` over the host memory); the driver call is a no-op. Timed:
packing the parameter block (once per env and constants change), converting a stream (once per
stream), one launch's Python (every step: the stream lookup, the call, the result check), and, for
comparison, cuda-core's per-launch packing of the same parameters (``launch`` does it every call).
Not timed: cuda-bindings' argument conversion and the driver's launch, the context push/pop and
torch's current-stream lookup around it (they need a GPU).

    python .ci/launch_host_cost.py
"""

from __future__ import annotations

import ctypes
import timeit
from types import SimpleNamespace

import numba
import numpy as np
import torch
from cuda.bindings import driver
from cuda.core._kernel_arg_handler import ParamHolder  # what cuda.core.launch builds per call

from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.tag.env import TagEnv
from gpu_envs.kernels import cuda as drivers


class DeviceView:
    """A host array seen as a device array (only the interface the packing reads)."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.__cuda_array_interface__ = {
            "data": (array.ctypes.data, False),
            "shape": array.shape,
            "strides": None if array.flags.c_contiguous else array.strides,
            "typestr": array.dtype.str,
            "version": 3,
        }


def typeof(value):
    if isinstance(value, DeviceView):
        return numba.typeof(value.array)
    if isinstance(value, tuple):
        return numba.types.Tuple(tuple(map(typeof, value)))
    return numba.typeof(value)


class Dispatcher:
    """Compiles nothing: the kernel image's parameter table is the packing's own."""

    typeof_pyval = staticmethod(typeof)

    def compile(self, signature):
        parameters: list = []
        for argument_type, value in zip(signature, self.args):
            drivers.pack(argument_type, value, parameters)
        info = [SimpleNamespace(size=ctypes.sizeof(p)) for p in parameters]
        function = SimpleNamespace(handle=1, arguments_info=info)
        library = SimpleNamespace(get_cufunc=lambda: SimpleNamespace(kernel=function))
        return SimpleNamespace(bind=lambda: None, library=library)


class Stream:
    """A numba stream: the ``__cuda_stream__`` protocol."""

    def __cuda_stream__(self):
        return (0, 0xA0)


def best_us(function, number: int) -> float:
    return min(timeit.repeat(function, number=number, repeat=5)) / number * 1e6


def measure(name: str, env) -> None:
    args = (
        env.num_envs,
        tuple(DeviceView(a) if isinstance(a, np.ndarray) else a for a in env.kernel_args),
    )
    dispatcher = Dispatcher()
    dispatcher.args = args
    launch = drivers.PreparedLaunch.of(dispatcher, args, 4, 256, 0)
    count = len(launch.parameters)
    stream = Stream()
    launch(stream)
    pack = best_us(lambda: drivers.PreparedLaunch.of(dispatcher, args, 4, 256, 0), 200)
    convert = best_us(lambda: drivers.driver_stream(stream), 20_000)
    step = best_us(lambda: launch(stream), 200_000)
    # numba-cuda hands cuda-core Python ints for the pointers, shapes and strides
    numba_args = [
        p.value or 0 if isinstance(p, (ctypes.c_void_p, ctypes.c_ssize_t)) else p
        for p in launch.parameters
    ]
    core = best_us(lambda: ParamHolder(numba_args), 20_000)
    print(
        f"{name}: {count} kernel parameters; packed once {pack:.0f} us; stream converted once "
        f"{convert:.2f} us; per launch {step:.2f} us (cuda-core would pack {core:.1f} us per "
        "launch)"
    )


if __name__ == "__main__":
    driver.cuLaunchKernel = lambda *args: (driver.CUresult.CUDA_SUCCESS,)  # no GPU: a no-op
    torch.set_num_threads(1)
    measure("CartPole", CartPoleVectorEnv(4096, "cpu", dtype=torch.float32))
    measure("Tag", TagEnv(1000, "cpu"))
