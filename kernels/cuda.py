"""The CUDA driver of every game, built from the same ``step_envs``/``reset_envs`` as the CPU
driver.

Two launch shapes:

- ``"thread"`` (CartPole, Pendulum): one thread per env, ``step_envs(i, i + 1, envs)``;
- ``"block"`` (Tag): one block per env, one thread per agent; the logic keeps the env's agents in
  dynamic shared memory through ``targets.env_rows`` and separates its phases with
  ``targets.barrier``.

Importing this module needs numba-cuda; it works on a GPU or under ``NUMBA_ENABLE_CUDASIM=1``.
Kernels are cached on disk (``cache=True``) like the CPU loops. Arguments are device arrays
(``numba.cuda`` arrays or anything with ``__cuda_array_interface__``).

The step has a lean launch path, :meth:`CUDADriver.prepare_step`: the kernel is compiled once for
the explicit signature of the env's arguments, and the launch's argument list (pointers, shapes,
strides, scalars) and configuration are built once; each step is then one driver launch on the
given stream, with no typing, dispatch or argument marshalling.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from numba import config, cuda

from gpu_envs.kernels import cuda_targets
from gpu_envs.kernels.cpu import source_digest

THREADS_PER_BLOCK = 256
#: Most threads of a ``"block"`` launch (agents beyond it are looped over by each thread).
MAX_THREADS_PER_AGENT_BLOCK = 256
#: Shared memory a block may use without opting in, on every GPU since compute capability 3.0.
SHARED_MEMORY_BYTES = 48 * 1024


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
        self.reset_kernel[self._launch_config(num_envs, num_agents, stream)](num_envs, mask, args)

    def prepare_step(self, num_envs: int, args: tuple, num_agents: int = 1) -> Callable:
        """The step as ``launch(stream)``, prepared once for these arguments: valid while the
        arrays of ``args`` live and keep their addresses (the engine prepares it again after
        :meth:`~gpu_envs.engine.kernel_env.KernelEnv.update_constants`).

        On a GPU the kernel is compiled for the explicit signature ``(int64, Tuple(typeof(arg)
        ...))`` and its flattened arguments are marshalled once; a call is one ``cuda.core``
        launch. The simulator has no driver to launch on: there the call is the ordinary launch.
        """
        grid, block, _, *shared = self._launch_config(num_envs, num_agents, 0)
        if config.ENABLE_CUDASIM:
            kernel = self.step_kernel
            return lambda stream: kernel[(grid, block, stream, *shared)](num_envs, args)
        return _prepared_launch(
            self.step_kernel, (num_envs, args), grid, block, shared[0] if shared else 0
        )


def _prepared_launch(dispatcher, args: tuple, grid: int, block: int, shared: int) -> Callable:
    """``launch(stream)`` of ``dispatcher`` compiled for the types of ``args``, whose driver
    arguments are marshalled here, once (numba-cuda's ``_Kernel.launch`` does it per call)."""
    from cuda.core import LaunchConfig, launch
    from numba.cuda._compat import CUDA_CORE_GE_1_0

    # the explicit signature (int64, Tuple(...)), typed here once instead of at every launch
    kernel = dispatcher.compile(tuple(dispatcher.typeof_pyval(value) for value in args))
    flat: list = []
    for argument_type, value in zip(kernel.argument_types, args):  # device arrays: no write-back
        kernel._prepare_args(argument_type, value, 0, [], flat)
    cooperative = "is_cooperative" if CUDA_CORE_GE_1_0 else "cooperative_launch"
    launch_config = LaunchConfig(grid=grid, block=block, shmem_size=shared, **{cooperative: False})
    function = kernel._codelibrary.get_cufunc().kernel
    return lambda stream: launch(stream, launch_config, function, *flat)


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
        cuda.jit(cache=True)(step_function),
        cuda.jit(cache=True)(reset_function),
        shape,
        shared_slots,
    )
