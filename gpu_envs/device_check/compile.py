"""Compile the kernels of every parity check at once, one process per check, before the checks.

numba compiles a game's CPU loops and CUDA kernels on one core, for tens of seconds per game and
dtype on a cold cache (the first run on a fresh machine); the parity checks, one after the other,
would pay them in series. :func:`warm_caches` runs each check's envs for one step in its own
process instead, as many at once as there are cores: they fill numba's disk cache, and the checks
that follow load from it. ``python -m gpu_envs.device_check.compile DEVICE SPEC_JSON`` is
one such process.

Two processes adding the float32 and float64 signatures of one game's kernels to numba's cache
index at once could leave an entry pointing at the other signature's code; each process
therefore saves under the index's lock (:func:`gpu_envs.kernels.compile_lock.lock_cache_saves`,
numba's and numba-cuda's cache files alike, the lock the game drivers take too).
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
from gpu_envs.kernels.compile_lock import lock_cache_saves


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
    workers = max(1, min(len(unique), workers or os.cpu_count() or 1))

    def compile_apart(spec: ParitySpec) -> str | None:
        command = [sys.executable, "-m", __name__, device, json.dumps(spec.to_json())]
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return None if done.returncode == 0 else f"{spec.game} ({spec.setting}): {last}"

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        failed = [error for error in pool.map(compile_apart, unique) if error is not None]
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


def main(argv: Sequence[str]) -> int:
    """One process of :func:`warm_caches`: ``argv`` is ``DEVICE SPEC_JSON``."""
    device, spec = argv
    lock_cache_saves()
    compile_spec(ParitySpec.from_json(json.loads(spec)), device)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
