"""Interleaved rounds, one process: CartPole default env.step, old (HEAD's _step_on_cpu) vs new,
beside the bare compiled loop (as `gpu-envs bench --bare-kernel`: same loop, same output arrays,
unchecked NumPy actions). Prints medians of per-round times and of per-round ratios to bare."""

import statistics
import subprocess
import sys
import time
import types

import numpy as np
import torch

import gpu_envs
from gpu_envs.kernels.cpu import _NO_BOUNDS

# HEAD's engine before the change (commit 192de4c), loaded beside the current one
source = subprocess.check_output(["git", "show", "192de4c:gpu_envs/engine/kernel_env.py"])
orig = types.ModuleType("kernel_env_orig")
exec(compile(source, "kernel_env_orig.py", "exec"), orig.__dict__)


def runners(n):
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 2, size=(64, n), dtype=np.int64)
    tpool = list(torch.as_tensor(pool))
    out = {}
    for name in ("old", "new", "new_noval_reuse"):
        env = gpu_envs.CartPoleVectorEnv(n, validate_actions=name != "new_noval_reuse")
        if name == "new_noval_reuse":
            env.copy_outputs = False
        if name == "old":
            env._step_on_cpu = types.MethodType(orig.KernelEnv._step_on_cpu, env)
        env.reset(seed=0)

        def f(step=env.step):
            for a in tpool:
                obs, r, te, tr, info = step(a)

        out[name] = f
    env = gpu_envs.CartPoleVectorEnv(n)
    env.reset(seed=0)
    slot, driver, args = env._actions_index, env._driver, env.kernel_args
    before, like, after = args[:slot], args[slot], args[slot + 1 :]
    compiled = driver.compiled_step(n, before, like, after, pool[0], _NO_BOUNDS, False)
    plist = list(pool)

    def bare():
        for a in plist:
            compiled(n, before, like, after, a, _NO_BOUNDS, False)

    out["bare"] = bare
    return out


sizes = [int(s) for s in sys.argv[1].split(",")]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 9
budget_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.2
for n in sizes:
    r = runners(n)
    for f in r.values():
        for _ in range(5):
            f()
    t0 = time.perf_counter()
    r["bare"]()
    per = time.perf_counter() - t0
    reps = max(1, int(budget_s / per))
    times = {k: [] for k in r}
    for _ in range(rounds):
        for k, f in r.items():
            t0 = time.perf_counter_ns()
            for _ in range(reps):
                f()
            times[k].append((time.perf_counter_ns() - t0) / (64 * reps) / 1000)
    cells = []
    for k, v in times.items():
        ratio = statistics.median(b / a for a, b in zip(v, times["bare"]))
        cells.append(
            f"{k} {statistics.median(v):.2f} us ({n / statistics.median(v):.1f}M/s,"
            f" {ratio:.2f}x bare)"
        )
    print(f"n={n}: " + "; ".join(cells), flush=True)
