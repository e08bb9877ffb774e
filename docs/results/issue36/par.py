"""Parallel (2-thread prange) vs serial CPU step loop of CartPole, interleaved rounds in one
process, optionally beside N busy-loop processes. Usage: par.py SIZES ROUNDS BUSY"""

import os
import statistics
import subprocess
import sys
import time

import numba
import numpy as np

import gpu_envs
from gpu_envs.kernels.cpu import _NO_BOUNDS

sizes = [int(s) for s in sys.argv[1].split(",")]
rounds = int(sys.argv[2])
busy = int(sys.argv[3])
procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
try:
    time.sleep(0.5)
    print(
        f"numba threads {numba.config.NUMBA_NUM_THREADS} layer {numba.config.THREADING_LAYER}, "
        f"busy {busy}, affinity {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.1f}"
    )
    for n in sizes:
        env = gpu_envs.CartPoleVectorEnv(n)
        env.reset(seed=0)
        pool = list(np.random.default_rng(0).integers(0, 2, size=(64, n), dtype=np.int64))
        slot, d, args = env._actions_index, env._driver, env.kernel_args
        before, like, after = args[:slot], args[slot], args[slot + 1 :]
        sig = (
            numba.typeof(n),
            *map(numba.typeof, (before, like, after, pool[0], _NO_BOUNDS, False)),
        )
        loops = {"serial": d.step_serial.compile(sig), "parallel": d.step_parallel.compile(sig)}
        from gpu_envs.kernels.cpu import AdaptiveStep

        loops["adaptive"] = AdaptiveStep(loops["parallel"], loops["serial"])
        for f in loops.values():
            for a in pool:
                f(n, before, like, after, a, _NO_BOUNDS, False)
        times = {k: [] for k in loops}
        for _ in range(rounds):
            for k, f in loops.items():
                t0 = time.perf_counter()
                for a in pool:
                    f(n, before, like, after, a, _NO_BOUNDS, False)
                times[k].append((time.perf_counter() - t0) / 64)
        ratio = statistics.median(s / p for s, p in zip(times["serial"], times["parallel"]))
        adaptive = statistics.median(s / p for s, p in zip(times["serial"], times["adaptive"]))
        print(
            f"n={n}: "
            + ", ".join(
                f"{k} {statistics.median(v) * 1e6:.0f} us ({n / statistics.median(v) / 1e6:.1f}M/s;"
                f" worst {max(v) * 1e6:.0f})"
                for k, v in times.items()
            )
            + f"; parallel/serial speed {ratio:.2f}x; adaptive/serial {adaptive:.2f}x,"
            f" ends on {'parallel' if loops['adaptive'].parallel_runs else 'serial'}",
            flush=True,
        )
finally:
    for p in procs:
        p.kill()
