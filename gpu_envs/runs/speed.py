"""The one speed measure of a run: phase times, training seconds, and speed between two marks.

- ``PhaseTimer``: time spent in the named phases (policy evaluation, action sampling, env step,
  training) since the run started. On the CPU a phase is timed with ``time.perf_counter``; on CUDA
  it is bracketed by CUDA events read only in ``totals_ms()`` (at log time), so timing adds no host
  synchronisation to the step loop.
- ``TrainClock``: training seconds (wall time without evaluation and video), across resumes.
- ``SpeedMeter``: a ``mark()`` now and then; between two marks the ms per iteration of each phase
  and the env-/agent-steps per second (``block``), the console's and results.json's speed block.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass

import torch

PHASES = ("policy_eval", "action_sampling", "env_step", "training")


class PhaseTimer:
    """Accumulates the time spent in named phases."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._seconds: dict[str, float] = defaultdict(float)
        self._events: dict[str, list] = defaultdict(list)

    @contextmanager
    def phase(self, name: str):
        if self.cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            yield
            end.record()
            self._events[name].append((begin, end))
        else:
            start = time.perf_counter()
            yield
            self._seconds[name] += time.perf_counter() - start

    def totals_ms(self) -> dict[str, float]:
        """Milliseconds per phase so far (synchronises CUDA once, then drops the read events)."""
        if self.cuda and self._events:
            torch.cuda.synchronize()
            for name, pairs in self._events.items():
                self._seconds[name] += sum(s.elapsed_time(e) for s, e in pairs) / 1000.0
            self._events.clear()
        return {name: 1000.0 * self._seconds[name] for name in PHASES}


class TrainClock:
    """Training seconds: wall time since ``start()`` without the paused spans (evaluation, video),
    plus ``previous`` (the seconds of the run before a resume)."""

    def __init__(self):
        self.previous = 0.0
        self._start: float | None = None
        self._paused = 0.0
        self._pause_start: float | None = None

    def start(self) -> None:
        self._start, self._paused = time.perf_counter(), 0.0

    def seconds(self) -> float:
        """The training seconds so far; it stands still inside ``paused()``."""
        if self._start is None:
            return self.previous
        now = time.perf_counter() if self._pause_start is None else self._pause_start
        return self.previous + now - self._start - self._paused

    @contextmanager
    def paused(self):
        self._pause_start = time.perf_counter()
        try:
            yield
        finally:
            self._paused += time.perf_counter() - self._pause_start
            self._pause_start = None


@dataclass(frozen=True)
class SpeedMark:
    """Where a run stood at one moment: iterations, training seconds, phase ms, agent steps."""

    iteration: int
    seconds: float
    phase_ms: dict[str, float]
    agent_steps: float


class SpeedMeter:
    """Marks of a run's ``PhaseTimer`` and ``TrainClock``, and the speed between two of them."""

    def __init__(self, timer: PhaseTimer, clock: TrainClock):
        self.timer, self.clock = timer, clock

    def mark(self, iteration: int, agent_steps: float) -> SpeedMark:
        return SpeedMark(iteration, self.clock.seconds(), self.timer.totals_ms(), agent_steps)

    @staticmethod
    def env_steps_per_second(since: SpeedMark, now: SpeedMark, steps_per_iteration: int) -> float:
        seconds = now.seconds - since.seconds
        return steps_per_iteration * (now.iteration - since.iteration) / max(seconds, 1e-9)

    @staticmethod
    def collect_seconds(since: SpeedMark, now: SpeedMark) -> float:
        """Seconds spent collecting (every phase but training) between the marks."""
        return sum(now.phase_ms[p] - since.phase_ms[p] for p in PHASES if p != "training") / 1e3

    @staticmethod
    def block(
        since: SpeedMark, now: SpeedMark, num_iterations: int, steps_per_iteration: int
    ) -> dict:
        """Mean ms per iteration of each phase and env-/agent-steps per second between the marks
        (the original framework's speed block, by its names)."""
        iterations = max(now.iteration - since.iteration, 1)
        ms = {p: (now.phase_ms[p] - since.phase_ms[p]) / iterations for p in PHASES}
        seconds = now.seconds - since.seconds
        env_steps = steps_per_iteration * (now.iteration - since.iteration)
        agent_steps = now.agent_steps - since.agent_steps
        return {
            "Iteration": f"{now.iteration} / {num_iterations}",
            "Mean policy eval time per iter (ms)": ms["policy_eval"],
            "Mean action sample time per iter (ms)": ms["action_sampling"],
            "Mean env. step time per iter (ms)": ms["env_step"],
            "Mean training time per iter (ms)": ms["training"],
            "Mean total time per iter (ms)": 1000.0 * seconds / iterations,
            "Mean env-steps per sec (total)": env_steps / seconds if seconds else float("nan"),
            "Mean agent-steps per sec (total)": agent_steps / seconds if seconds else float("nan"),
        }
