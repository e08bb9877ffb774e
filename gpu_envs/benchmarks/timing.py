"""The measurement protocol every benchmark shares: first call apart, warm-up, calibrated repeats, median.

A benchmark is reduced to ``call()``, which advances ``steps_per_call`` env-steps (one step of one
env instance is one env-step), and an optional ``sync()`` that blocks until the device has finished.

1. The first call is timed on its own (it includes JIT compilation or loading the compile cache).
2. Warm-up: at least ``warmup_calls`` more calls and at least ``warmup_seconds``.
3. The number of calls per repeat is calibrated from the warm-up so a repeat lasts ``target_seconds``.
4. ``repeats`` timed repeats (synchronised at the end); the reported rate is their median.
   Implementations compared side by side (:func:`measure_rounds`) take their repeats in rounds,
   one repeat of each per round, and a ratio between two of them is the median of the per-round
   ratios (:func:`median_ratio`): a slow drift of a shared host's speed cancels out.

The machines these run on are shared, so during every repeat :class:`BackgroundLoad` records the
share of the machine's CPU time used by *other* processes (and stolen by the hypervisor), read from
``/proc/stat``. Before a repeat the protocol waits (bounded) for a quiet machine; a repeat whose
background load reaches ``quiet_threshold`` is retried up to ``extra_attempts`` times, and the
median is taken over the quiet repeats (or over the least loaded ones when too few were quiet).
:attr:`Measurement.noisy` then tells a table to mark the cell.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Mapping

#: Background load (fraction of all CPUs) from which a repeat counts as disturbed.
QUIET_THRESHOLD = 0.10
#: A reported median whose repeats saw at least this background load is marked noisy.
NOISY_THRESHOLD = 0.15

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_cpu_seconds() -> tuple[float, float] | None:
    """(busy, steal) CPU-seconds of the whole machine since boot, or None without ``/proc/stat``."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks + [0] * (8 - len(ticks))
    return (user + nice + system + irq + softirq) / _CLOCK_TICKS, steal / _CLOCK_TICKS


class BackgroundLoad:
    """Share of the machine's CPU time that other processes used (plus hypervisor steal) in a window.

    ``start()`` opens the window, ``stop()`` returns the load as a fraction of all CPUs (0.5 on a
    2-CPU machine = one core busy elsewhere). This process's own CPU time (all its threads) is
    subtracted. Returns None where ``/proc/stat`` is missing (not Linux).
    """

    def __init__(self) -> None:
        self._cpus = os.cpu_count() or 1
        self._start: tuple[float, float, float, float] | None = None

    def start(self) -> None:
        machine = _machine_cpu_seconds()
        self._start = (
            None if machine is None else (*machine, time.process_time(), time.perf_counter())
        )

    def stop(self) -> float | None:
        if self._start is None:
            return None
        machine = _machine_cpu_seconds()
        if machine is None:
            return None
        busy0, steal0, own0, wall0 = self._start
        capacity = max(time.perf_counter() - wall0, 1e-9) * self._cpus
        others = (machine[0] - busy0) - (time.process_time() - own0)
        return max(0.0, others + (machine[1] - steal0)) / capacity


def wait_for_quiet(
    max_wait_seconds: float, threshold: float = QUIET_THRESHOLD, window_seconds: float = 0.3
) -> float | None:
    """Sleep in windows until the background load drops below ``threshold`` or time runs out.

    Returns the load of the last window (None without ``/proc/stat`` or when not waiting at all).
    """
    if max_wait_seconds <= 0:
        return None
    deadline = time.perf_counter() + max_wait_seconds
    monitor = BackgroundLoad()
    while True:
        monitor.start()
        time.sleep(window_seconds)
        load = monitor.stop()
        if load is None or load < threshold or time.perf_counter() >= deadline:
            return load


@dataclasses.dataclass(frozen=True)
class Repeat:
    """One timed repeat: its throughput, duration and the background load during it."""

    env_steps_per_s: float
    seconds: float
    background_load: float | None


@dataclasses.dataclass(frozen=True)
class Measurement:
    """The outcome of :func:`measure`; ``env_steps_per_s`` is the median over ``chosen``."""

    env_steps_per_s: float
    first_call_s: float
    steps_per_call: int
    calls_per_repeat: int
    warmup_calls: int
    warmup_s: float
    attempts: tuple[Repeat, ...]
    chosen: tuple[Repeat, ...]

    @property
    def repeat_rates(self) -> list[float]:
        """Throughput of each repeat behind the median."""
        return [r.env_steps_per_s for r in self.chosen]

    @property
    def max_background_load(self) -> float | None:
        """Highest background load among the chosen repeats (None when unknown)."""
        loads = [r.background_load for r in self.chosen if r.background_load is not None]
        return max(loads) if loads else None

    @property
    def noisy(self) -> bool:
        """True when other processes loaded the machine during a repeat behind the median."""
        load = self.max_background_load
        return load is not None and load >= NOISY_THRESHOLD

    def to_dict(self) -> dict:
        """A JSON-ready record with every attempt."""
        return {
            "env_steps_per_s": self.env_steps_per_s,
            "env_steps_per_s_min": min(self.repeat_rates),
            "env_steps_per_s_max": max(self.repeat_rates),
            "repeat_rates": self.repeat_rates,
            "first_call_s": self.first_call_s,
            "steps_per_call": self.steps_per_call,
            "calls_per_repeat": self.calls_per_repeat,
            "warmup_calls": self.warmup_calls,
            "warmup_s": self.warmup_s,
            "max_background_load": self.max_background_load,
            "noisy": self.noisy,
            "attempts": [dataclasses.asdict(a) for a in self.attempts],
        }


def measure(
    call: Callable[[], object],
    steps_per_call: int,
    sync: Callable[[], object] | None = None,
    **options,
) -> Measurement:
    """Time ``call`` with the shared protocol (see the module docstring) and return the figures.

    Args:
        call: advances ``steps_per_call`` env-steps.
        steps_per_call: env-steps per call (``num_envs`` for one batched step).
        sync: blocks until asynchronous work is done (e.g. ``torch.cuda.synchronize``).
        options: the keyword arguments of :func:`measure_rounds`.
    """
    return measure_rounds({"call": (call, steps_per_call, sync)}, **options)["call"]


def measure_rounds(
    calls: Mapping[str, tuple[Callable[[], object], int, Callable[[], object] | None]],
    *,
    repeats: int = 3,
    target_seconds: float = 1.0,
    warmup_seconds: float = 0.5,
    warmup_calls: int = 2,
    wait_quiet_seconds: float = 0.0,
    extra_attempts: int = 0,
    quiet_threshold: float = QUIET_THRESHOLD,
) -> dict[str, Measurement]:
    """Time several implementations, ``{name: (call, steps_per_call, sync)}``, their repeats in rounds.

    Each implementation gets its first call and warm-up; then every round times one repeat of each,
    back to back, so a drift of the machine's speed (a shared host) hits all of them alike. A round
    is disturbed when any of its repeats saw a background load of ``quiet_threshold`` or more.
    The ``chosen`` repeats of the returned measurements come from the same rounds, in the same
    order: ``chosen[i]`` of two implementations ran side by side, so their ratio can be taken per
    round (:func:`median_ratio`).

    Args:
        repeats: timed rounds behind each median.
        target_seconds: calibrated duration of one repeat.
        warmup_seconds / warmup_calls: each warm-up lasts at least this long and this many calls.
        wait_quiet_seconds: before each round, wait up to this long for other processes to use
            less than ``quiet_threshold`` of the CPUs (0: do not wait).
        extra_attempts: retries allowed for rounds that were disturbed by background load.
    """
    if repeats < 1 or warmup_calls < 1 or any(steps < 1 for _, steps, _ in calls.values()):
        raise ValueError("repeats, steps_per_call and warmup_calls must be >= 1")
    if target_seconds <= 0 or warmup_seconds < 0:
        raise ValueError("target_seconds must be > 0 and warmup_seconds >= 0")
    calls = {
        name: (call, steps, sync or (lambda: None)) for name, (call, steps, sync) in calls.items()
    }
    warm = {
        name: _warm_up(call, sync, warmup_calls, warmup_seconds, target_seconds)
        for name, (call, _, sync) in calls.items()
    }
    rounds: list[dict[str, Repeat]] = []
    while True:
        wait_for_quiet(wait_quiet_seconds, quiet_threshold)
        rounds.append(
            {
                name: _timed_repeat(call, steps, sync, warm[name].calls_per_repeat)
                for name, (call, steps, sync) in calls.items()
            }
        )
        quiet = [i for i, r in enumerate(rounds) if _round_load(r) < quiet_threshold]
        if len(quiet) >= repeats or len(rounds) >= repeats + extra_attempts:
            break
    if len(quiet) < repeats:  # the least loaded rounds, still in the order they ran
        quiet = sorted(sorted(range(len(rounds)), key=lambda i: _round_load(rounds[i]))[:repeats])
    chosen = [rounds[i] for i in quiet[:repeats]]
    return {
        name: Measurement(
            env_steps_per_s=statistics.median(r[name].env_steps_per_s for r in chosen),
            first_call_s=warm[name].first_call_s,
            steps_per_call=calls[name][1],
            calls_per_repeat=warm[name].calls_per_repeat,
            warmup_calls=warm[name].calls,
            warmup_s=warm[name].seconds,
            attempts=tuple(r[name] for r in rounds),
            chosen=tuple(r[name] for r in chosen),
        )
        for name in calls
    }


def median_ratio(ours: Measurement | dict, reference: Measurement | dict) -> float:
    """The median over rounds of ``ours / reference`` throughput (measurements of one
    :func:`measure_rounds` call, or their ``to_dict()`` records); the ratio of the medians when the
    two were not measured in the same rounds."""
    rates = [
        m.repeat_rates if isinstance(m, Measurement) else m["repeat_rates"]
        for m in (ours, reference)
    ]
    if len(rates[0]) != len(rates[1]):
        return statistics.median(rates[0]) / statistics.median(rates[1])
    return statistics.median(a / b for a, b in zip(*rates))


@dataclasses.dataclass(frozen=True)
class _WarmUp:
    first_call_s: float
    calls: int
    seconds: float
    calls_per_repeat: int


def _warm_up(
    call: Callable[[], object],
    sync: Callable[[], object],
    min_calls: int,
    min_seconds: float,
    target_seconds: float,
) -> _WarmUp:
    """Time the first call apart, warm up, and calibrate the calls of a ``target_seconds`` repeat."""
    clock = time.perf_counter
    start = clock()
    call()
    sync()
    first_call_s = clock() - start
    start = clock()
    done = 0
    while done < min_calls or clock() - start < min_seconds:
        call()
        done += 1
    sync()
    seconds = clock() - start
    calls_per_repeat = max(1, round(target_seconds * done / seconds)) if seconds > 0 else 1
    return _WarmUp(first_call_s, done, seconds, calls_per_repeat)


def _timed_repeat(
    call: Callable[[], object], steps_per_call: int, sync: Callable[[], object], calls: int
) -> Repeat:
    monitor = BackgroundLoad()
    monitor.start()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    sync()
    seconds = time.perf_counter() - start
    return Repeat(calls * steps_per_call / seconds, seconds, monitor.stop())


def _round_load(round_: dict[str, Repeat]) -> float:
    """The highest background load of a round's repeats (0 when unknown)."""
    return max((r.background_load or 0.0) for r in round_.values())


def format_share(value: float | None) -> str:
    """A background load as a percentage of the CPUs ("37%"), "–" when unknown."""
    return "–" if value is None else f"{100 * value:.0f}%"


def format_rate(value: float) -> str:
    """A rate with a k / M / G suffix and 3 significant digits (12.3M)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain Markdown table (readable in a terminal and pasteable into docs/)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def cycle_pool(pool) -> Callable[[], object]:
    """A function returning the pool's entries in turn, forever."""
    index = [0]

    def next_item():
        item = pool[index[0]]
        index[0] = (index[0] + 1) % len(pool)
        return item

    return next_item
