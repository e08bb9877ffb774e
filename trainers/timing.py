"""Per-phase wall-clock accounting (policy evaluation, action sampling, env step, training).

On the CPU a phase is timed with ``time.perf_counter``. On CUDA the phase is bracketed by CUDA
events and the elapsed times are read only in ``totals_ms()`` (at log time), so timing adds no host
synchronisation to the step loop.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import torch

PHASES = ("policy_eval", "action_sampling", "env_step", "training")


class PhaseTimer:
    """Accumulates the time spent in named phases since the last ``reset()``."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.reset()

    def reset(self) -> None:
        self._seconds: dict[str, float] = defaultdict(float)
        self._events: dict[str, list] = defaultdict(list)

    @contextmanager
    def phase(self, name: str):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events[name].append((start, end))
        else:
            start = time.perf_counter()
            yield
            self._seconds[name] += time.perf_counter() - start

    def totals_ms(self) -> dict[str, float]:
        """Milliseconds per phase since the last reset (synchronises CUDA once)."""
        totals = {name: 1000.0 * self._seconds[name] for name in PHASES}
        if self.cuda and self._events:
            torch.cuda.synchronize()
            for name, pairs in self._events.items():
                totals[name] = totals.get(name, 0.0) + sum(s.elapsed_time(e) for s, e in pairs)
        return totals
