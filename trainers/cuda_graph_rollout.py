"""``trainer.cuda_graphs``: the trainer's whole rollout captured as one CUDA graph and replayed.

:meth:`~gpu_envs.trainers.rollout.Collector.collect_eagerly` is made of device work only (policy
forward, action sampling, the env's kernel launch, buffer writes, episode sums): no host reads.
On a CUDA device, :class:`GraphRollout` captures one call of it in a ``torch.cuda.graph``
(:class:`gpu_envs.engine.cuda_graphs.CapturedStep`) at the collector's warm-up; every later rollout
is one
``graph.replay()``: ``num_steps`` env steps for one host call.

What the capture needs, and how it gets it:

- the carried state keeps its address: the collector's ``obs`` and ``prev_done`` are rebound by
  every step (and by a reset or a resume); the graph reads them from static tensors at its start
  and copies the rollout's last values back into them at its end, and :meth:`GraphRollout.replay`
  copies a rebound tensor into them first;
- no timing events inside the capture: the collector's timer is a no-op while it is captured, and
  the replay is timed as one ``env_step`` phase;
- each step's outputs are the env's own buffers (``copy_outputs=False``: the collector copies
  what it keeps before the next step), so the graph holds no output copies;
- the draws come from torch's CUDA generator (the ``torch`` sampler, the one used on CUDA), whose
  offsets a graph advances at each replay;
- no opponent pool (its snapshot schedule is host logic between rollouts).
- the kernel's arguments of the capture: the env copies new constants into the arrays the graph
  reads; if it ever hands its kernels a new array or setting instead
  (``env.kernel_args_generation``), the next :meth:`GraphRollout.replay` captures the rollout
  again first (without warm-up: the kernels are compiled, and warm-up rollouts would advance the
  run; the env's new launch is prepared before the capture, not inside it). A closed env's
  rollout is not replayed (:class:`~gpu_envs.engine.cuda_graphs.StaleGraphError`).

Where one of these does not hold (CPU, opponents, an env that validates actions) or the capture
fails, the collector runs eagerly, as with ``trainer.cuda_graphs=false``. The warm-up rollouts
(:data:`gpu_envs.engine.cuda_graphs.WARMUP_STEPS`) run before the seeded reset of the run.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING

import torch

from gpu_envs.engine import cuda_graphs

if TYPE_CHECKING:
    from gpu_envs.trainers.rollout import Collector, RolloutBuffer


class _NoTimer:
    """A :class:`~gpu_envs.runs.speed.PhaseTimer` that records nothing (inside a capture)."""

    @staticmethod
    def phase(name: str) -> contextlib.nullcontext:
        del name
        return contextlib.nullcontext()


def unsupported(collector: Collector) -> str | None:
    """Why ``collector``'s rollout cannot be captured, or None when it can."""
    if collector.opponents is not None:
        return "an opponent pool plays between rollouts"
    env = getattr(collector.game, "env", None)
    return "no engine env" if env is None else cuda_graphs.capturable(env)


def make(collector: Collector, enabled: bool) -> GraphRollout | None:
    """The graph rollout of ``collector`` when ``enabled`` and supported, else None."""
    if not enabled or unsupported(collector) is not None:
        return None
    return GraphRollout(collector)


class GraphRollout:
    """One rollout of ``collector`` as a CUDA graph: :meth:`capture` once, then :meth:`replay`."""

    def __init__(self, collector: Collector):
        self.collector = collector
        self.graph: cuda_graphs.CapturedStep | None = None  # set when captured
        self._obs: torch.Tensor | None = None
        self._prev_done = collector.prev_done.clone()
        # The collector copies what it keeps of each step's outputs before the next step.
        collector.game.env.copy_outputs = False

    def capture(self) -> None:
        """Capture one rollout (after the collector's kernels are compiled); on failure warn and
        leave the collector eager."""
        self._obs = self.collector.game.reset(0).clone()  # the run's seeded reset comes later
        self._capture(cuda_graphs.WARMUP_STEPS)

    def _capture(self, warmup_steps: int) -> None:
        collector, timer = self.collector, self.collector.timer
        assert self._obs is not None
        collector.timer = _NoTimer()
        try:
            self.graph = cuda_graphs.CapturedStep(
                self._rollout, self._obs.device, warmup_steps, envs=(collector.game.env,)
            )
        except RuntimeError as error:
            warnings.warn(
                f"trainer.cuda_graphs: the rollout could not be captured ({error}); rolling out "
                "eagerly",
                stacklevel=3,
            )
            collector.graph = None
        finally:
            collector.timer = timer

    def _rollout(self) -> dict[str, RolloutBuffer]:
        """The captured work: one eager rollout from the static carried state, which it updates."""
        collector = self.collector
        assert self._obs is not None
        collector.obs, collector.prev_done = self._obs, self._prev_done
        buffers = collector.collect_eagerly()
        self._obs.copy_(collector.obs)
        self._prev_done.copy_(collector.prev_done)
        collector.obs, collector.prev_done = self._obs, self._prev_done
        return buffers

    def replay(self) -> dict[str, RolloutBuffer]:
        """One rollout: the graph's replay (after copying a rebound ``obs``/``prev_done`` in, and
        capturing again if the env's kernel arguments changed)."""
        collector = self.collector
        assert self.graph is not None and self._obs is not None
        if collector.obs is not self._obs:  # a reset or a resume rebound it
            self._obs.copy_(collector.obs)
        if collector.prev_done is not self._prev_done:
            self._prev_done.copy_(collector.prev_done)
        if self.graph.stale() is not None:  # the env's kernel arguments changed: capture anew
            self._capture(warmup_steps=0)
            if collector.graph is None:
                return collector.collect_eagerly()
        with collector.timer.phase("env_step"):
            self.graph.replay()
        collector.obs, collector.prev_done = self._obs, self._prev_done
        return collector.buffers
