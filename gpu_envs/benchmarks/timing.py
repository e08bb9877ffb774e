"""The measurement protocol every benchmark shares: first call apart, warm-up, calibrated repeats,
median.

A benchmark is reduced to a :class:`Runner`, whose ``call()`` advances ``num_envs`` env-steps (one
step of one env instance is one env-step), and whose optional ``sync()`` blocks until the device
has finished.

1. The first call is timed on its own (it includes JIT compilation or loading the compile cache).
2. Warm-up: at least ``warmup_calls`` more calls and at least ``warmup_seconds``.
3. The number of calls per repeat is calibrated from the warm-up so a repeat lasts
   ``target_seconds``.
4. ``repeats`` timed repeats (synchronised at the end); the reported rate is their median.
   Implementations compared side by side (:func:`measure_rounds`) take their repeats in rounds,
   one repeat of each per round, and a ratio between two of them is the median of the per-round
   ratios (:func:`median_ratio`): a slow drift of a shared host's speed cancels out.

The machines these run on are shared, so during every repeat
:class:`gpu_envs.benchmarks.machine.BackgroundLoad` records the share of the machine's CPU time
used by *other* processes. Before a round the protocol waits (bounded) for a quiet machine; a
round whose background load reaches ``quiet_threshold`` is retried up to ``extra_attempts`` times,
and the median is taken over the quiet rounds (or over the least loaded ones when too few were
quiet). :attr:`Measurement.noisy` then tells a table to mark the cell.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from gpu_envs.benchmarks.machine import QUIET_THRESHOLD, BackgroundLoad, wait_for_quiet

#: A reported median whose repeats saw at least this background load is marked noisy.
NOISY_THRESHOLD = 0.15


def _nothing() -> None:
    return None


@dataclasses.dataclass
class Runner:
    """One workload at one size: ``call()`` advances ``num_envs`` games by one step.

    ``sync()`` blocks until asynchronous work is done (e.g. ``torch.cuda.synchronize``),
    ``close()`` frees the workload (a runner is a context manager that closes it);
    ``agents_per_env`` turns env-steps into agent-steps, ``config`` says the workload's settings in
    words, and ``meta`` holds the fields a record adds about it (dtype, device, ...).
    """

    call: Callable[[], object]
    num_envs: int
    sync: Callable[[], object] | None = None
    close: Callable[[], object] = _nothing
    agents_per_env: int = 1
    config: str = ""
    meta: dict = dataclasses.field(default_factory=dict)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


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


def measure(runner: Runner, **options) -> Measurement:
    """Time ``runner`` with the shared protocol (see the module docstring) and return the figures.

    Args:
        options: the keyword arguments of :func:`measure_rounds`.
    """
    return measure_rounds({"runner": runner}, **options)["runner"]


def measure_rounds(
    runners: Mapping[str, Runner],
    *,
    repeats: int = 3,
    target_seconds: float = 1.0,
    warmup_seconds: float = 0.5,
    warmup_calls: int = 2,
    wait_quiet_seconds: float = 0.0,
    extra_attempts: int = 0,
    quiet_threshold: float = QUIET_THRESHOLD,
    calls_per_repeat: int | None = None,
) -> dict[str, Measurement]:
    """Time several implementations, ``{name: runner}``, their repeats in rounds.

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
        calls_per_repeat: a fixed number of calls per repeat instead of the calibrated one.
    """
    if repeats < 1 or warmup_calls < 1 or any(r.num_envs < 1 for r in runners.values()):
        raise ValueError("repeats, num_envs and warmup_calls must be >= 1")
    if target_seconds <= 0 or warmup_seconds < 0:
        raise ValueError("target_seconds must be > 0 and warmup_seconds >= 0")
    warm = {
        name: _warm_up(runner, warmup_calls, warmup_seconds, target_seconds, calls_per_repeat)
        for name, runner in runners.items()
    }
    rounds: list[dict[str, Repeat]] = []
    while True:
        wait_for_quiet(wait_quiet_seconds, quiet_threshold)
        rounds.append(
            {
                name: _timed_repeat(runner, warm[name].calls_per_repeat)
                for name, runner in runners.items()
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
            steps_per_call=runner.num_envs,
            calls_per_repeat=warm[name].calls_per_repeat,
            warmup_calls=warm[name].calls,
            warmup_s=warm[name].seconds,
            attempts=tuple(r[name] for r in rounds),
            chosen=tuple(r[name] for r in chosen),
        )
        for name, runner in runners.items()
    }


def _rates(measured: Measurement | dict) -> list[float] | None:
    if isinstance(measured, Measurement):
        return measured.repeat_rates
    return measured.get("repeat_rates")


def _steps_per_s(measured: Measurement | dict) -> float:
    if isinstance(measured, Measurement):
        return measured.env_steps_per_s
    return measured["env_steps_per_s"]


def median_ratio(ours: Measurement | dict, reference: Measurement | dict) -> float:
    """The median over rounds of ``ours / reference`` throughput.

    Takes measurements of one :func:`measure_rounds` call, or their ``to_dict()`` records; the
    ratio of the medians when the two were not measured in the same rounds (a different number of
    repeats, or a record without ``repeat_rates``).
    """
    rates = [_rates(ours), _rates(reference)]
    if rates[0] is None or rates[1] is None:
        return _steps_per_s(ours) / _steps_per_s(reference)
    if len(rates[0]) != len(rates[1]):
        return statistics.median(rates[0]) / statistics.median(rates[1])
    return statistics.median(a / b for a, b in zip(*rates))


def fastest_per_round(references: Sequence[dict]) -> dict:
    """One reference record from several measured in the same rounds: the fastest in each round."""
    if len(references) == 1:
        return references[0]
    rates = [max(rates) for rates in zip(*(r["repeat_rates"] for r in references))]
    return {"repeat_rates": rates, "env_steps_per_s": statistics.median(rates)}


def alternating(seeds: Sequence[int], impls: Sequence[str]) -> Iterator[tuple[int, str]]:
    """``(seed, impl)`` for runs too long to repeat in rounds: the implementations in turn per seed,
    their order reversed every other seed, so a drift of the machine's load hits all of them."""
    for k, seed in enumerate(seeds):
        for impl in impls if k % 2 == 0 else impls[::-1]:
            yield seed, impl


@dataclasses.dataclass(frozen=True)
class _WarmUp:
    first_call_s: float
    calls: int
    seconds: float
    calls_per_repeat: int


def _warm_up(
    runner: Runner,
    min_calls: int,
    min_seconds: float,
    target_seconds: float,
    calls_per_repeat: int | None,
) -> _WarmUp:
    """Time the first call apart, warm up, and calibrate the calls of a ``target_seconds`` repeat
    (unless ``calls_per_repeat`` fixes them)."""
    call, sync = runner.call, runner.sync or _nothing
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
    if calls_per_repeat is None:
        calls_per_repeat = max(1, round(target_seconds * done / seconds)) if seconds > 0 else 1
    return _WarmUp(first_call_s, done, seconds, calls_per_repeat)


def _timed_repeat(runner: Runner, calls: int) -> Repeat:
    call = runner.call
    monitor = BackgroundLoad()
    monitor.start()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    (runner.sync or _nothing)()
    seconds = time.perf_counter() - start
    return Repeat(calls * runner.num_envs / seconds, seconds, monitor.stop())


def _round_load(round_: dict[str, Repeat]) -> float:
    """The highest background load of a round's repeats (0 when unknown)."""
    return max((r.background_load or 0.0) for r in round_.values())


def cycle_pool(pool) -> Callable[[], object]:
    """A function returning the pool's entries in turn, forever.

    The entries are taken out once (a tensor's or array's rows become views made here), so a call
    costs the same for every kind of pool: indexing a torch tensor per call made a new view each
    time (about 1 us), timed as part of the env it fed.
    """
    entries = list(pool)
    index = [0]

    def next_item():
        item = entries[index[0]]
        index[0] = (index[0] + 1) % len(entries)
        return item

    return next_item
