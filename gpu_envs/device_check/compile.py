"""Compile the kernels of every parity check at once, one process per game, before the checks.

numba compiles a game's CPU loops and CUDA kernels on one core, for tens of seconds per game and
dtype on a cold cache (the first run on a fresh machine); the parity checks, one after the other,
would pay them in series. :func:`warm_caches` runs each game's checks' envs for one step in a
process of its own instead, as many at once as there are cores: they fill numba's disk cache, and
the checks that follow load from it. ``python -m gpu_envs.device_check.compile DEVICE SPECS_JSON``
is one such process.

One process per game, its checks in turn, not one per check: numba's cache index of a function
is read, extended and written back by each process that compiles a new signature of it, with no
lock, and two processes adding the float32 and float64 signatures of one game's kernels at once
may both pick the same data file name, leaving an index entry that points at the other
signature's code. The games share no cached function with different signatures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from gpu_envs.device_check.rows import ParitySpec, Row


def compile_spec(spec: ParitySpec, device: str) -> None:
    """Build ``spec``'s envs on the CPU and ``device``, reset them and step them once (what the
    check compiles, at its sizes)."""
    from gpu_envs.benchmarks.parity import compare_devices

    compare_devices(spec.make_env, 1, device=device)


def warm_caches(specs: Sequence[ParitySpec], device: str, workers: int | None = None) -> list[Row]:
    """Compile ``specs`` in parallel processes (``workers``, default one per core); one row with
    the wall time. A process that fails is named in the row (its check then compiles, and shows
    the error, by itself)."""
    unique = list({json.dumps(s.to_json(), sort_keys=True): s for s in specs}.values())
    games: dict[str, list[ParitySpec]] = {}
    for spec in unique:
        games.setdefault(spec.game, []).append(spec)
    workers = max(1, min(len(games), workers or os.cpu_count() or 1))

    def compile_apart(group: list[ParitySpec]) -> list[str]:
        command = [sys.executable, "-m", __name__, device, json.dumps([s.to_json() for s in group])]
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = done.stderr.strip().splitlines()
        named = [line.removeprefix(FAILED) for line in lines if line.startswith(FAILED)]
        if done.returncode == 0 or named:
            return named
        return [f"{group[0].game}: {(lines or ['no message'])[-1]}"]

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        failed = [error for errors in pool.map(compile_apart, games.values()) for error in errors]
    seconds = time.perf_counter() - start
    result = f"{len(unique)} env configs in {workers} processes: {seconds:.1f} s"
    if failed:
        result += "; failed: " + "; ".join(failed)
    record = {
        "kind": "compile",
        "configs": len(unique),
        "workers": workers,
        "seconds": seconds,
        "failed": failed,
    }
    return [Row("kernel compile", f"parity envs, cpu and {device}", result, "", record)]


#: How a process of :func:`warm_caches` names a check it could not compile, on stderr.
FAILED = "compile failed: "


def main(argv: Sequence[str]) -> int:
    """One process of :func:`warm_caches`: ``argv`` is ``DEVICE SPECS_JSON`` (one game's checks,
    compiled in turn; each failure named on stderr)."""
    device, specs = argv
    status = 0
    for data in json.loads(specs):
        spec = ParitySpec.from_json(data)
        try:
            compile_spec(spec, device)
        except Exception as error:  # (the next check still compiles)
            message = f"{type(error).__name__}: {error}".splitlines()[0]
            print(f"{FAILED}{spec.game} ({spec.setting}): {message}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
