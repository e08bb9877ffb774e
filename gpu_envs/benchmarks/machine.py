"""The machine a benchmark runs on: what it is, and how busy other processes keep it.

The machines these benchmarks run on are shared, so every figure is recorded beside the load it
was measured under. :class:`BackgroundLoad` gives the share of the machine's CPU time used by
*other* processes (plus time stolen by the hypervisor) in a window, from ``psutil``'s system-wide
and per-process CPU times; :func:`wait_for_quiet` waits (bounded) until that share drops; and
:func:`run_when_quiet` wraps one long run (a training) with both and with the load average.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import platform
import time
from collections.abc import Callable

import psutil

#: Background load (fraction of all CPUs) from which a window counts as disturbed.
QUIET_THRESHOLD = 0.10

#: Packages whose versions a record names, where installed (the peers' too).
PACKAGES = (
    "gpu-envs",
    "numpy",
    "torch",
    "numba",
    "gymnasium",
    "stable-baselines3",
    "lightning",
    "vmas",
    "mpe2",
    "jaxmarl",
)


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (else ``platform.processor()``)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def load_average() -> float:
    """The 1-minute load average (emulated by ``psutil`` where the OS has none)."""
    return psutil.getloadavg()[0]


def machine_info() -> dict:
    """CPU model and counts, load average, thread counts and package versions of this run.

    ``torch_cpu_capability`` is the instruction set torch's CPU kernels use (``AVX2``, ``AVX512``):
    training figures are bit-reproducible only on the same one
    (gpu_envs.benchmarks.training_figures).

    ``cpu_count`` is the machine's logical CPUs (the capacity :class:`BackgroundLoad` divides by);
    ``cpus`` those this process may run on, which bound the threads it can use.
    """
    import numba
    import torch

    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    process = psutil.Process()
    affinity = process.cpu_affinity() if hasattr(process, "cpu_affinity") else None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": psutil.cpu_count(),
        "cpus": len(affinity) if affinity else psutil.cpu_count(),
        "load_average": psutil.getloadavg(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "numba_threads": numba.get_num_threads(),
        "versions": versions,
    }


def _cpu_seconds() -> tuple[float, float, float]:
    """(busy, steal) CPU-seconds of the whole machine since boot, and this process's own."""
    machine = psutil.cpu_times()
    busy = sum(getattr(machine, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))
    own = psutil.Process().cpu_times()
    return busy, getattr(machine, "steal", 0.0), own.user + own.system


class BackgroundLoad:
    """Share of the machine's CPU time that other processes (and the hypervisor) took in a window.

    ``start()`` opens the window, ``stop()`` returns the load as a fraction of all CPUs (0.5 on a
    2-CPU machine = one core busy elsewhere). This process's own CPU time (all its threads) is
    subtracted. ``stop()`` returns None before any ``start()``.
    """

    def __init__(self) -> None:
        self._cpus = psutil.cpu_count() or 1
        self._start: tuple[float, float, float, float] | None = None

    def start(self) -> None:
        self._start = (*_cpu_seconds(), time.perf_counter())

    def stop(self) -> float | None:
        if self._start is None:
            return None
        busy, steal, own = _cpu_seconds()
        busy0, steal0, own0, wall0 = self._start
        capacity = max(time.perf_counter() - wall0, 1e-9) * self._cpus
        others = (busy - busy0) - (own - own0)
        return max(0.0, others + (steal - steal0)) / capacity


def wait_for_quiet(
    max_wait_seconds: float, threshold: float = QUIET_THRESHOLD, window_seconds: float = 0.3
) -> float | None:
    """Sleep in windows until the background load drops below ``threshold`` or time runs out.

    Returns the load of the last window (None when not waiting at all).
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


def run_when_quiet(run: Callable[[], dict], max_wait_seconds: float, threshold: float) -> dict:
    """Wait (bounded) for a quiet machine, then ``run()``; its record with the load beside it.

    For runs too long to repeat in rounds (a whole training): ``background_busy_before`` is the
    background load of the last window waited, ``loadavg_before`` / ``loadavg_after`` the 1-minute
    load average around the run.
    """
    busy = wait_for_quiet(max_wait_seconds, threshold)
    before = load_average()
    record = run()
    return {
        **record,
        "background_busy_before": busy,
        "loadavg_before": before,
        "loadavg_after": load_average(),
    }


def add_quiet_arguments(parser: argparse.ArgumentParser) -> None:
    """``--quiet-threshold`` and ``--max-wait``: the arguments of :func:`run_when_quiet`."""
    parser.add_argument(
        "--quiet-threshold",
        type=float,
        default=0.25,
        help="before each run wait until other processes use less than this fraction of the CPUs",
    )
    parser.add_argument(
        "--max-wait", type=float, default=60.0, help="longest wait for a quiet machine, s"
    )
