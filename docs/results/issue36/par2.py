"""CartPole env.step (defaults) at 4096/16384 with the adaptive loop choice vs the step loop
forced parallel (HEAD's behaviour) and forced serial, interleaved rounds in one process, beside
BUSY busy-loop processes. Usage: par2.py SIZES ROUNDS BUSY ROUND_S"""

import os
import statistics
import subprocess
import sys
import time

import numba
import numpy as np
import torch

import gpu_envs
from gpu_envs.kernels.cpu import AdaptiveStep

sizes = [int(s) for s in sys.argv[1].split(",")]
rounds, busy, round_s = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
try:
    time.sleep(0.5)
    print(
        f"numba threads {numba.config.NUMBA_NUM_THREADS}, busy {busy},"
        f" CPUs {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    for n in sizes:
        pool = list(torch.from_numpy(np.random.default_rng(0).integers(0, 2, size=(64, n))))
        envs = {}
        for mode in ("adaptive", "parallel", "serial"):
            env = gpu_envs.CartPoleVectorEnv(n)
            env.reset(seed=0)
            env.step(pool[0])
            chooser = env._cpu_step[1]
            assert isinstance(chooser, AdaptiveStep)
            if mode != "adaptive":
                env._cpu_step[1] = chooser._loops[mode == "parallel"]
            envs[mode] = (env, chooser)
        times = {k: [] for k in envs}
        for _ in range(rounds):
            for k, (env, _) in envs.items():
                step, count, t0 = env.step, 0, time.perf_counter()
                while True:
                    for a in pool[:16]:
                        step(a)
                    count += 16
                    t = time.perf_counter() - t0
                    if t > round_s:
                        break
                times[k].append(t / count)
        med = {k: statistics.median(v) for k, v in times.items()}
        rat = {
            k: statistics.median(s / x for s, x in zip(times["serial"], v))
            for k, v in times.items()
        }
        print(
            f"n={n}: "
            + "; ".join(
                f"{k} {med[k] * 1e6:.0f} us/step = {n / med[k] / 1e6:.1f}M/s ({rat[k]:.2f}x serial)"
                for k in envs
            )
            + f"; adaptive ended on {'parallel' if envs['adaptive'][1].parallel_runs else 'serial'}"
            f"; adaptive ended on {'parallel' if envs['adaptive'][1].parallel_runs else 'serial'}",
            flush=True,
        )
finally:
    for p in procs:
        p.kill()
