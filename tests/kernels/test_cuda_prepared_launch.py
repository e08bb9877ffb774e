"""The GPU's prepared step launch (``kernels/cuda.py``), with fakes of the dispatcher, cuda-core's
kernel and the driver call: no GPU here.

Proven: the kernel is compiled and its parameters packed once; the parameter block follows
numba-cuda's kernel ABI (the count and sizes of the ``.param`` list in the PTX numba-cuda emits for
the same signature) and holds the arguments' values; each call is one ``cuLaunchKernel`` of that
same block on the stream's driver handle, made once per stream; the launch path raises no warning
(``warnings.simplefilter("error")``); a failure while preparing falls back to the dispatcher's
ordinary launch with one ``LaunchFallbackWarning``; a failed driver launch raises. Not proven: the
launch on a GPU (``gpu-envs device-check --full`` runs it).
"""

import ctypes
import re
import struct
import warnings
from types import SimpleNamespace

import numba
import numpy as np
import pytest
from cuda.bindings import driver
from numba import config
from numba.core import types

from gpu_envs.kernels import cuda as drivers

GRID, BLOCK = 4, drivers.THREADS_PER_BLOCK


class FakeArray:
    """A device array: only its ``__cuda_array_interface__``."""

    def __init__(self, pointer: int, shape: tuple, dtype, strides=None):
        self.dtype = np.dtype(dtype)
        self.__cuda_array_interface__ = {
            "data": (pointer, False),
            "shape": shape,
            "strides": strides,
            "typestr": self.dtype.str,
            "version": 3,
        }


def typeof(value):
    if isinstance(value, FakeArray):
        ndim = len(value.__cuda_array_interface__["shape"])
        return types.Array(numba.from_dtype(value.dtype), ndim, "C")
    if isinstance(value, tuple):
        return types.Tuple(tuple(map(typeof, value)))
    return numba.typeof(value)


#: (num_envs, KernelArgs-like tuple): a 1-d float32 buffer, a strided 2-d int64 one, a uint64
#: constant, float64 / float32 / bool settings.
NUM_ENVS = GRID * BLOCK - 5
KERNEL_ARGS = (
    FakeArray(0x1000, (3,), np.float32),
    FakeArray(0x2000, (2, 4), np.int64, strides=(64, 8)),
    np.uint64(2**63 + 5),
    2.5,
    np.float32(1.5),
    True,
)
ARGS = (NUM_ENVS, KERNEL_ARGS)
#: What the kernel must receive, parameter by parameter (struct format, value).
EXPECTED = [
    ("q", NUM_ENVS),
    *[("q", 0), ("q", 0), ("q", 3), ("q", 4), ("q", 0x1000), ("q", 3), ("q", 4)],
    *[("q", 0), ("q", 0), ("q", 8), ("q", 8), ("q", 0x2000), ("q", 2), ("q", 4), ("q", 64)],
    ("q", 8),
    ("Q", 2**63 + 5),
    ("d", 2.5),
    ("f", 1.5),
    ("?", True),
]


class FakeDispatcher:
    """A ``cuda.jit`` dispatcher: ``compile`` gives a kernel whose cuda-core ``Kernel`` has the
    parameter table ``sizes``; ``dispatcher[config](*args)`` is the ordinary launch."""

    def __init__(self, sizes):
        self.__name__ = "fake_step_kernel"
        self.events: list = []
        function = SimpleNamespace(
            handle=0x77,
            arguments_info=[SimpleNamespace(offset=0, size=size) for size in sizes],
        )
        self.kernel = SimpleNamespace(
            bind=lambda: self.events.append("bind"),
            library=SimpleNamespace(get_cufunc=lambda: SimpleNamespace(kernel=function)),
        )

    typeof_pyval = staticmethod(typeof)

    def compile(self, signature):
        self.events.append(("compile", signature))
        return self.kernel

    def __getitem__(self, launch_config):
        return lambda *args: self.events.append(("ordinary launch", launch_config, args))


class FakeStream:
    """A numba stream: the ``__cuda_stream__`` protocol, counted."""

    def __init__(self, pointer: int):
        self.pointer, self.asked = pointer, 0

    def __cuda_stream__(self):
        self.asked += 1
        return (0, self.pointer)


def step_driver(dispatcher) -> drivers.CUDADriver:
    return drivers.CUDADriver(None, None, dispatcher, None, "thread", 0)


@pytest.fixture
def on_a_gpu(monkeypatch):
    """``prepare_step`` takes its GPU branch (also when the simulator is on); warnings start
    fresh."""
    monkeypatch.setattr(config, "ENABLE_CUDASIM", 0)
    monkeypatch.setattr(drivers, "_WARNED", set())


@pytest.fixture
def driver_launches(monkeypatch):
    """``cuLaunchKernel`` recording each call with its parameter block decoded."""
    launches = []

    def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = (ctypes.c_void_p * len(EXPECTED)).from_address(params)
        values = [
            struct.unpack(fmt, ctypes.string_at(pointer, struct.calcsize(fmt)))[0]
            for (fmt, _), pointer in zip(EXPECTED, pointers)
        ]
        launches.append(
            (int(function), (gx, gy, gz, bx, by, bz, shared), int(stream), params, values, extra)
        )
        return (driver.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(driver, "cuLaunchKernel", launch)
    return launches


def test_the_step_is_packed_once_and_each_call_is_one_driver_launch(on_a_gpu, driver_launches):
    dispatcher = FakeDispatcher([struct.calcsize(fmt) for fmt, _ in EXPECTED])
    first, second = FakeStream(0xA0), FakeStream(0xB0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        launch = step_driver(dispatcher).prepare_step(*ARGS)
        for stream in (first, second, first, 0):
            launch(stream)
    assert dispatcher.events == [("compile", tuple(map(typeof, ARGS))), "bind"]
    assert [(f, config, stream) for f, config, stream, *_ in driver_launches] == [
        (0x77, (GRID, 1, 1, BLOCK, 1, 1, 0), handle) for handle in (0xA0, 0xB0, 0xA0, 0)
    ]
    assert {params for *_, params, _, _ in driver_launches} == {launch._address}  # one block
    values = [value for _, value in EXPECTED]
    assert all(decoded == values for *_, decoded, _ in driver_launches)
    assert {extra for *_, extra in driver_launches} == {0}
    assert (first.asked, second.asked) == (1, 1)  # each stream converted once


def test_the_packing_follows_numba_cudas_kernel_abi():
    """The packed parameters have the count and sizes of the ``.param`` list numba-cuda compiles
    for the same signature (what ``arguments_info`` reads from the kernel image on a GPU)."""
    if config.ENABLE_CUDASIM:
        pytest.skip("compile_ptx needs numba-cuda, not the simulator")
    from numba import cuda

    def kernel(num_envs, args):
        pass

    signature = tuple(map(typeof, ARGS))
    try:
        ptx, _ = cuda.compile_ptx(kernel, signature, cc=(9, 0))
    except Exception as error:  # no NVRTC/NVVM in this environment
        pytest.skip(f"compile_ptx unavailable: {error}")
    entry = ptx[ptx.index(".entry") :]
    kinds = re.findall(r"\.param \.([a-z])(\d+) ", entry[: entry.index(")")])
    parameters: list = []
    for argument_type, value in zip(signature, ARGS):
        drivers.pack(argument_type, value, parameters)
    assert [ctypes.sizeof(p) for p in parameters] == [int(bits) // 8 for _, bits in kinds]
    assert len(parameters) == len(EXPECTED)


@pytest.mark.parametrize("cause", ["image", "pack"])
def test_a_failure_while_preparing_falls_back_with_one_warning(
    on_a_gpu, driver_launches, monkeypatch, cause
):
    sizes = [struct.calcsize(fmt) for fmt, _ in EXPECTED]
    if cause == "image":  # the kernel image disagrees with the packing
        sizes = sizes[:-1]
    else:
        monkeypatch.setattr(drivers, "pack", lambda *a: (_ for _ in ()).throw(TypeError("odd")))
    dispatcher = FakeDispatcher(sizes)
    cuda_driver = step_driver(dispatcher)
    with pytest.warns(drivers.LaunchFallbackWarning) as caught:
        launches = [cuda_driver.prepare_step(*ARGS) for _ in range(3)]  # three envs
    assert len(caught) == 1
    assert ("kernel takes 20" if cause == "image" else "TypeError: odd") in str(caught[0].message)
    stream = FakeStream(0xA0)
    launches[0](stream)
    assert dispatcher.events[-1] == ("ordinary launch", (GRID, BLOCK, stream), ARGS)
    assert driver_launches == []


def test_a_failed_driver_launch_raises(on_a_gpu, monkeypatch):
    error = driver.CUresult.CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(driver, "cuLaunchKernel", lambda *args: (error,))
    dispatcher = FakeDispatcher([struct.calcsize(fmt) for fmt, _ in EXPECTED])
    launch = step_driver(dispatcher).prepare_step(*ARGS)
    with pytest.raises(RuntimeError, match="cuLaunchKernel of the step kernel failed"):
        launch(0)


def test_driver_stream_refuses_an_unknown_protocol_version():
    with pytest.raises(ValueError, match="protocol version 1"):
        drivers.driver_stream(SimpleNamespace(__cuda_stream__=lambda: (1, 0xA0)))


@pytest.mark.cudasim
def test_simulated_cuda_steps_raise_no_warning():
    """The engine's CUDA branch of ``reset`` and ``step`` (the simulator's ordinary launches) under
    ``warnings.simplefilter("error")``, bar the simulator's own uint64 overflow notes."""
    from gpu_envs.engine import devices
    from gpu_envs.games.cartpole import CartPoleVectorEnv

    if not devices.simulated_cuda():
        pytest.skip("the simulated device")
    env = CartPoleVectorEnv(4, "cuda", validate_actions=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
        env.reset(seed=0)
        for _ in range(3):
            env.step(np.ones(4, dtype=np.int64))
