"""The CUDA driver of every game, built from the same ``step_envs``/``reset_envs`` as the CPU
driver.

Two launch shapes:

- ``"thread"`` (CartPole, Pendulum): one thread per env, ``step_envs(i, i + 1, envs)``;
- ``"block"`` (Tag): one block per env, one thread per agent; the logic keeps the env's agents in
  dynamic shared memory through ``targets.env_rows`` and separates its phases with
  ``targets.barrier``.

Importing this module needs numba-cuda; it works on a GPU or under ``NUMBA_ENABLE_CUDASIM=1``.
Kernels are cached on disk (``cache=True``) like the CPU loops, and compiled once among processes
starting at once (:mod:`~gpu_envs.kernels.compile_lock`). Arguments are device arrays
(``numba.cuda`` arrays or anything with ``__cuda_array_interface__``).

The step has a lean launch path, :meth:`CUDADriver.prepare_step`: the kernel is compiled once for
the explicit signature of the env's arguments, its parameters (pointers, shapes, strides, scalars)
are packed once into a kept parameter block checked against the kernel image's own parameter
table, and each step is then one ``cuLaunchKernel`` (cuda-bindings' driver API) on the given stream,
whose driver handle is made once per stream. Only public APIs are used: numba-cuda's ``compile``,
``bind`` and ``library.get_cufunc()``, cuda-core's ``Kernel`` (``handle``, ``arguments_info``), the
``__cuda_array_interface__`` and ``__cuda_stream__`` protocols and the driver binding; the versions
tested are pinned in ``pyproject.toml``. If preparing fails, the step falls back to the ordinary
dispatcher launch with one :class:`LaunchFallbackWarning`.
"""

from __future__ import annotations

import ctypes
import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import config, cuda
from numba.core import types

from gpu_envs.kernels import cuda_targets
from gpu_envs.kernels.compile_lock import compile_once
from gpu_envs.kernels.cpu import source_digest

THREADS_PER_BLOCK = 256
#: Most threads of a ``"block"`` launch (agents beyond it are looped over by each thread).
MAX_THREADS_PER_AGENT_BLOCK = 256
#: Shared memory a block may use without opting in, on every GPU since compute capability 3.0.
SHARED_MEMORY_BYTES = 48 * 1024
#: The start of numba-cuda's warning on a small grid (``_LaunchConfiguration``).
LOW_OCCUPANCY_MESSAGE = r"Grid size \d+ will likely result in GPU under-utilization"


def _named(function: Callable, name: str) -> Callable:
    function.__name__ = function.__qualname__ = name
    return function


def _thread_kernels(game: str, step_envs, reset_envs, kernel_args):
    def step_kernel(num_envs, args):
        i = cuda.grid(1)
        if i < num_envs:
            step_envs(i, i + 1, kernel_args(*args))

    def reset_kernel(num_envs, mask, args):
        i = cuda.grid(1)
        if i < num_envs:
            reset_envs(i, i + 1, mask, kernel_args(*args))

    return _named(step_kernel, f"{game}_step_kernel"), _named(reset_kernel, f"{game}_reset_kernel")


def _block_kernels(game: str, step_envs, reset_envs, kernel_args):
    def step_kernel(num_envs, args):
        e = cuda.blockIdx.x
        step_envs(e, e + 1, kernel_args(*args))

    def reset_kernel(num_envs, mask, args):
        e = cuda.blockIdx.x
        reset_envs(e, e + 1, mask, kernel_args(*args))

    return _named(step_kernel, f"{game}_step_kernel"), _named(reset_kernel, f"{game}_reset_kernel")


@dataclass(frozen=True)
class CUDADriver:
    """The two kernels of one game and their launch shape."""

    step_function: Callable  # the Python functions (for ``cuda.compile_ptx``)
    reset_function: Callable
    step_kernel: Callable
    reset_kernel: Callable
    shape: str
    shared_slots: int

    def _launch_config(self, num_envs: int, num_agents: int, stream) -> tuple:
        if self.shape == "thread":
            return (
                (num_envs + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK,
                THREADS_PER_BLOCK,
                stream,
            )
        threads = min(MAX_THREADS_PER_AGENT_BLOCK, 32 * ((num_agents + 31) // 32))
        return (num_envs, threads, stream, self.shared_bytes(num_agents))

    def shared_bytes(self, num_agents: int) -> int:
        """Dynamic shared memory of one block of a ``"block"`` launch."""
        return self.shared_slots * cuda_targets.SHARED_BYTES_PER_AGENT_SLOT * num_agents

    def max_agents(self) -> int:
        """The most agents an env may have for its block to fit in shared memory."""
        return SHARED_MEMORY_BYTES // max(self.shared_bytes(1), 1)

    def reset(self, num_envs: int, mask, args: tuple, num_agents: int = 1, stream=0) -> None:
        """Reset the envs where ``mask`` is True."""
        configured(self.reset_kernel, self._launch_config(num_envs, num_agents, stream))(
            num_envs, mask, args
        )

    def prepare_step(self, num_envs: int, args: tuple, num_agents: int = 1) -> Callable:
        """The step as ``launch(stream)``, prepared once for these arguments: valid while the
        arrays of ``args`` live and keep their addresses and its scalars their values (the engine
        prepares it again when :meth:`~gpu_envs.engine.kernel_env.KernelEnv.update_constants`
        changes them).

        On a GPU a call is one driver launch of the parameters packed here
        (:class:`PreparedLaunch`); if preparing it fails, it is the ordinary dispatcher launch,
        announced by one :class:`LaunchFallbackWarning`. The simulator has no driver to launch on:
        there it is the ordinary launch.
        """
        grid, block, _, *shared = self._launch_config(num_envs, num_agents, 0)
        kernel = self.step_kernel

        def ordinary(stream) -> None:
            configured(kernel, (grid, block, stream, *shared))(num_envs, args)

        if config.ENABLE_CUDASIM:
            return ordinary
        try:
            return PreparedLaunch.of(
                kernel, (num_envs, args), grid, block, shared[0] if shared else 0
            )
        except Exception as error:  # any failure: the ordinary launch still steps the envs
            _warn_fallback(kernel, error)
            return ordinary


def configured(kernel, launch_config: tuple):
    """``kernel[launch_config]`` without numba-cuda's ``NumbaPerformanceWarning`` on a grid of
    fewer than 128 blocks: small grids are expected here (a few envs, a partial reset), and the
    warning would come at every launch (an error under ``-W error``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=LOW_OCCUPANCY_MESSAGE)
        return kernel[launch_config]


class LaunchFallbackWarning(RuntimeWarning):
    """The prepared launch could not be prepared; the step uses numba's ordinary launch."""


_WARNED: set[str] = set()


def _warn_fallback(kernel, error: Exception) -> None:
    """One warning per kernel and cause, however many envs prepare their step."""
    message = (
        f"gpu_envs: the prepared launch of {getattr(kernel, '__name__', kernel)} could not be "
        f"prepared ({type(error).__name__}: {error}); stepping with numba's ordinary launch (more "
        "host time per step)"
    )
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, LaunchFallbackWarning, stacklevel=3)


class PreparedLaunch:
    """``launch(stream)``: one ``cuLaunchKernel`` of a compiled kernel with a kept parameter block.

    ``parameters`` holds one C value per kernel parameter (numba-cuda's order: an array is its
    meminfo, parent, size, itemsize, data pointer, shape and strides; a tuple its members in
    turn); ``pointers`` is the ``void*[]`` block of their addresses that every launch hands the
    driver. A stream (any ``__cuda_stream__`` object, or 0) is converted to its driver handle on
    its first launch only.
    """

    __slots__ = ("_address", "_function", "_launch", "_streams", "config", "parameters", "pointers")

    def __init__(self, function, grid: int, block: int, shared: int, parameters: list):
        from cuda.bindings import driver

        self._launch = driver.cuLaunchKernel
        self._function = driver.CUfunction(int(function))  # a CUkernel launches as a CUfunction
        self.config = (grid, 1, 1, block, 1, 1, shared)
        self.parameters = parameters
        self.pointers = (ctypes.c_void_p * len(parameters))(*map(ctypes.addressof, parameters))
        self._address = ctypes.addressof(self.pointers)
        self._streams: dict = {}

    @classmethod
    def of(cls, dispatcher, args: tuple, grid: int, block: int, shared: int) -> PreparedLaunch:
        """``dispatcher`` compiled for the types of ``args`` (numba's disk cache serves it), bound
        to the current context, and ``args`` packed; a ``TypeError`` when the packed parameters
        do not match the kernel image's in number or size."""
        signature = tuple(dispatcher.typeof_pyval(value) for value in args)
        kernel = dispatcher.compile(signature)
        kernel.bind()
        function = kernel.library.get_cufunc().kernel  # cuda-core's Kernel
        parameters: list = []
        for argument_type, value in zip(signature, args, strict=True):
            pack(argument_type, value, parameters)
        packed = [ctypes.sizeof(parameter) for parameter in parameters]
        expected = [info.size for info in function.arguments_info]
        if packed != expected:
            raise TypeError(
                f"packed {len(packed)} parameters of sizes {packed}; the kernel takes "
                f"{len(expected)} of sizes {expected}"
            )
        return cls(function.handle, grid, block, shared, parameters)

    def __call__(self, stream) -> None:
        handle = self._streams.get(stream)
        if handle is None:
            handle = self._streams[stream] = driver_stream(stream)
        (error,) = self._launch(self._function, *self.config, handle, self._address, 0)
        if error:
            raise RuntimeError(f"cuLaunchKernel of the step kernel failed: {error!r}")


def driver_stream(stream):
    """The driver's ``CUstream`` of ``stream``: an object with ``__cuda_stream__`` (numba's,
    cuda-core's), or 0 / None for the default stream."""
    from cuda.bindings import driver

    if stream is None or (isinstance(stream, int) and stream == 0):
        return driver.CUstream(0)
    version, pointer = stream.__cuda_stream__()
    if version != 0:
        raise ValueError(f"__cuda_stream__ protocol version {version}: only version 0 is known")
    return driver.CUstream(int(pointer))


_SCALARS = {
    types.float32: ctypes.c_float,
    types.float64: ctypes.c_double,
    types.boolean: ctypes.c_bool,
}


def pack(argument_type, value, parameters: list) -> None:
    """Append the kernel parameters of one argument of numba type ``argument_type`` to
    ``parameters``, as C values, in numba-cuda's order (arrays from their
    ``__cuda_array_interface__``)."""
    if isinstance(argument_type, types.Array):
        interface = value.__cuda_array_interface__
        shape = tuple(interface["shape"])
        itemsize = np.dtype(interface["typestr"]).itemsize
        strides = interface.get("strides") or _strides(value, shape, itemsize)
        parameters += [ctypes.c_void_p(0), ctypes.c_void_p(0)]  # meminfo, parent
        parameters += map(ctypes.c_ssize_t, (math.prod(shape), itemsize))
        parameters.append(ctypes.c_void_p(interface["data"][0]))
        parameters += map(ctypes.c_ssize_t, (*shape, *strides))
    elif isinstance(argument_type, types.BaseTuple):
        for member_type, member in zip(argument_type.types, value, strict=True):
            pack(member_type, member, parameters)
    elif isinstance(argument_type, types.Integer):
        parameters.append(getattr(ctypes, f"c_{argument_type}")(value))
    elif argument_type in _SCALARS:
        parameters.append(_SCALARS[argument_type](value))
    else:
        raise TypeError(f"the prepared launch does not pack arguments of type {argument_type}")


def _strides(value, shape: tuple, itemsize: int) -> tuple:
    """The strides of an array whose interface gives none: its own ``strides`` where it has them
    (numba-cuda's device arrays say "contiguous" while ignoring broadcast dimensions, so a
    zero-stride constant has no strides in its interface), else C strides (the protocol's
    meaning of none)."""
    own = getattr(value, "strides", None)
    if isinstance(own, tuple) and len(own) == len(shape):
        return tuple(int(stride) for stride in own)
    return _c_strides(shape, itemsize)


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


@functools.cache
def make_driver(
    game: str,
    step_envs,
    reset_envs,
    kernel_args: type,
    shape: str = "thread",
    shared_slots: int = 0,
) -> CUDADriver:
    """The CUDA driver of ``game`` (``kernel_args``: the logic's ``KernelArgs``, built from the flat
    arguments for the logic; ``shape``: ``"thread"`` or ``"block"``; ``shared_slots``: the
    number of ``env_rows`` slots the logic uses per env in a ``"block"`` launch)."""
    if shape not in ("thread", "block"):
        raise ValueError(f"shape must be 'thread' or 'block', got {shape!r}")
    cuda_targets.register()
    make = _thread_kernels if shape == "thread" else _block_kernels
    step_function, reset_function = make(
        f"{game}_{source_digest(step_envs)}", step_envs, reset_envs, kernel_args
    )
    return CUDADriver(
        step_function,
        reset_function,
        compile_once(cuda.jit(cache=True)(step_function)),
        compile_once(cuda.jit(cache=True)(reset_function)),
        shape,
        shared_slots,
    )
