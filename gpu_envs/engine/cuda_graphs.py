"""CUDA-graph rollouts: a whole rollout step (policy forward, action sampling, env step, buffer
writes) captured once in a ``torch.cuda.graph`` and replayed, with no host work per step but one
``graph.replay()``.

What makes an env step capturable:

- its kernel launch goes to torch's *current* stream, looked up at every step
  (:func:`gpu_envs.engine.devices.launch_stream`): inside ``torch.cuda.graph`` that is the capturing
  stream, and numba-cuda (>= 0.29) records a launch on a capturing stream into the graph;
- the launch is prepared before the capture (:meth:`gpu_envs.kernels.cuda.CUDADriver.prepare_step`:
  compiled, arguments marshalled), so the capture sees only the launch;
- nothing reads back to the host: ``validate_actions=False`` (the value checks read a flag), and
  actions already on the device;
- every tensor the step reads or writes keeps its address: the env's own buffers
  (``copy_outputs=False``) or outputs the graph allocates in its private pool, and inputs copied
  into static tensors with ``copy_()`` rather than rebound.

A graph also bakes in the kernel's arguments: the addresses of the env's constants and the values
of its settings. :meth:`~gpu_envs.engine.kernel_env.KernelEnv.update_constants` (new reset options,
Tag's fixed start at a seeded reset) copies new constants into the same device arrays, so the graph
reads them; when it had to hand the kernels a new array or setting it counts
``env.kernel_args_generation`` up, and :meth:`CapturedStep.replay` of a step captured with
``envs=(env,)`` then raises :class:`StaleGraphError` rather than replay old arguments.

Usage::

    env = CartPoleVectorEnv(65536, "cuda", validate_actions=False)
    env.copy_outputs = False
    obs, _ = env.reset(seed=0)
    actions = torch.zeros(env.num_envs, dtype=torch.int64, device="cuda")

    def step():
        logits = policy(obs)
        actions.copy_(torch.distributions.Categorical(logits=logits).sample())
        env.step(actions)  # writes obs in place

    graph = CapturedStep(step, env.device, envs=(env,))  # warm-up steps, then the capture
    for _ in range(1000):
        graph.replay()

The warm-up steps are real steps (they advance the envs and the RNG): capture before the seeded
reset that starts the measured or trained run. :class:`CapturedStep` runs them with torch's sync
debug mode set to ``"error"``, so a host synchronisation in ``step`` fails there, with torch's
message, rather than as a capture error.

Guards of the capture and the replay:

- the launches of ``envs`` are prepared before the capture (``env.prepare_launch()``), also when
  it has no warm-up steps (a capture again after new kernel arguments): preparing compiles and
  loads code, which has no place inside a capture;
- numba's deallocations are deferred during the capture (``numba.cuda.defer_cleanup``): a numba
  device array finalised by the garbage collector there would flush numba's pending
  ``cuMemFree`` calls into the capture and invalidate it (the trainer's graph rollout would then
  fall back to eager rollouts);
- a step captured with ``envs`` refuses to replay once one of them is closed: its buffers are
  freed, and the graph would write into freed memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch

#: Real steps run before the capture (kernel compilation, launch preparation, allocator warm-up).
WARMUP_STEPS = 3


class StaleGraphError(RuntimeError):
    """A captured step would replay kernel arguments its env no longer uses."""


class CapturedStep:
    """``step`` (a function of static tensors, no arguments) captured in one CUDA graph on
    ``device``.

    Args:
        step: the work to capture; it must not synchronise with the host.
        device: the CUDA device it runs on.
        warmup_steps: calls of ``step`` on a side stream before the capture.
        pool: a graph memory pool to share with other graphs (``torch.cuda.graph_pool_handle()``).
        envs: the :class:`~gpu_envs.engine.kernel_env.KernelEnv` s that ``step`` steps: a replay
            after one of them changed its kernel arguments raises :class:`StaleGraphError`.
    """

    def __init__(
        self,
        step: Callable[[], object],
        device: torch.device,
        warmup_steps: int = WARMUP_STEPS,
        pool=None,
        envs: Sequence = (),
    ):
        current = torch.cuda.current_stream(device)
        side = torch.cuda.Stream(device)
        side.wait_stream(current)
        with torch.cuda.stream(side), sync_errors():
            for _ in range(warmup_steps):
                step()
        current.wait_stream(side)
        self.envs = tuple(envs)
        for env in self.envs:
            env.prepare_launch()
        self.generations = tuple(env.kernel_args_generation for env in self.envs)
        self.graph = torch.cuda.CUDAGraph()
        with frees_deferred(device), torch.cuda.graph(self.graph, pool=pool):
            self.outputs = step()

    def stale(self) -> str | None:
        """Why a replay would run outdated kernel arguments, or None when it would not."""
        for env, generation in zip(self.envs, self.generations):
            if env.kernel_args_generation != generation:
                return (
                    f"{type(env).__name__} gave its kernels new arguments since the capture "
                    "(update_constants replaced a constant's device array or changed a setting)"
                )
        return None

    def closed(self) -> str | None:
        """Why a replay would write freed memory (an env closed since the capture), or None."""
        for env in self.envs:
            if getattr(env, "closed", False):
                return (
                    f"{type(env).__name__} was closed after the capture: its buffers are freed "
                    "and a replay would write into them; capture a step of a live env"
                )
        return None

    def replay(self) -> None:
        """Run the captured step once (asynchronously, on torch's current stream); a
        :class:`StaleGraphError` if an env was closed or its kernel arguments changed since the
        capture."""
        closed = self.closed()
        if closed is not None:
            raise StaleGraphError(closed)
        why = self.stale()
        if why is not None:
            raise StaleGraphError(f"{why}; capture the step again")
        self.graph.replay()


@contextlib.contextmanager
def frees_deferred(device: torch.device) -> Iterator[None]:
    """Within the block, numba frees no device memory on ``device`` (``cuda.defer_cleanup`` of its
    context; nothing to defer where numba has no GPU)."""
    from numba import cuda

    if not cuda.is_available():
        yield
        return
    selected = cuda.gpus[device.index] if device.index is not None else contextlib.nullcontext()
    with selected, cuda.defer_cleanup():
        yield


@contextlib.contextmanager
def sync_errors() -> Iterator[None]:
    """Within the block, a host synchronisation raises (``torch.cuda.set_sync_debug_mode``)."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def capturable(env) -> str | None:
    """Why ``env`` (a :class:`~gpu_envs.engine.kernel_env.KernelEnv`) cannot be stepped inside a
    capture,
    or None when it can."""
    if env.kernel_target != "cuda" or env.device.type != "cuda":
        return "not on a CUDA GPU"
    if env.validate_actions:
        return "validate_actions=True reads a flag back every step"
    return None
