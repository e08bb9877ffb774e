"""Tag in AgileRL's ``AsyncPettingZooVecEnv`` (8 worker processes, as AgileRL's IPPO example runs
them) against MPE's ``simple_tag_v3`` in the same vector env: start-up and time per step.

Each measurement runs in a fresh process, ours and MPE's interleaved for ``--rounds`` rounds:
- start-up: building the vector env (8 workers), its first ``reset`` and first ``step`` (where our
  workers load or compile Tag's kernels). Ours twice per round: cold (``NUMBA_CACHE_DIR`` a fresh
  folder, so every worker finds no compiled kernel) and warm (the same folder again);
- per step: ``--steps`` vector steps of uniform random actions drawn before the clock (episodes
  reset in the workers, as in training).

Ours plays ``gpu_envs.tag_v0.parallel_env(**QUICK_TAG)`` (2 taggers, 4 runners, 25 steps) in
ippo_tag.py's wrapper, as that script trains it, MPE
``simple_tag_v3.parallel_env()`` (3 adversaries, 1 good agent, 2 obstacles, 25 cycles). Prints the
medians and ours/MPE's ratios (medians of the rounds' ratios); exits 1 if a run fails or a warm
start-up of ours takes more than ``--max-warm-ratio`` times MPE's start-up plus 2 s. Checked with
``.ci/client-check agilerl`` (docs/using-with-agilerl.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

NUM_ENVS = 8  # AgileRL's IPPO example


def make_env_fn(game: str):
    """The function each worker calls to build its game."""
    if game == "tag_v0":
        from ippo_tag import tag_env

        return tag_env
    from mpe2 import simple_tag_v3

    return lambda: simple_tag_v3.parallel_env()


def measure(game: str, steps: int) -> dict:
    """Start-up and time per vector step of 8 workers of ``game`` (in this process)."""
    import numpy as np
    from agilerl.vector.pz_async_vec_env import AsyncPettingZooVecEnv

    env_fn = make_env_fn(game)  # imports the game's modules before the clock
    start = time.perf_counter()
    env = AsyncPettingZooVecEnv([env_fn for _ in range(NUM_ENVS)])
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def random_actions() -> dict:
        actions = {}
        for agent in env.agents:
            space = env.single_action_space(agent)
            if hasattr(space, "nvec"):
                actions[agent] = rng.integers(0, space.nvec, size=(NUM_ENVS, len(space.nvec)))
            else:
                actions[agent] = rng.integers(0, space.n, size=NUM_ENVS)
        return actions

    env.step(random_actions())
    startup = time.perf_counter() - start
    drawn = [random_actions() for _ in range(steps)]
    start = time.perf_counter()
    for actions in drawn:
        env.step(actions)
    per_step = (time.perf_counter() - start) / steps
    env.close()
    return {"startup_s": startup, "step_us": per_step * 1e6}


def in_fresh_process(game: str, steps: int, cache_dir: str | None) -> dict:
    """:func:`measure` in its own interpreter (``NUMBA_CACHE_DIR=cache_dir`` when given)."""
    environment = dict(os.environ)
    if cache_dir is not None:
        environment["NUMBA_CACHE_DIR"] = cache_dir
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--one", game, "--steps", str(steps)],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if out.returncode != 0:
        sys.exit(f"{game} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {**result, "process_s": time.perf_counter() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000, help="timed vector steps per run")
    parser.add_argument("--max-warm-ratio", type=float, default=3.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.steps)))
        return 0
    rows: dict[str, list[dict]] = {"ours cold": [], "ours warm": [], "mpe": []}
    for round_ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
            cases = [("ours cold", "tag_v0"), ("ours warm", "tag_v0"), ("mpe", "mpe")]
            if round_ % 2:
                cases = cases[2:] + cases[:2]
            for name, game in cases:
                result = in_fresh_process(game, args.steps, cache if game == "tag_v0" else None)
                rows[name].append(result)
                print(
                    f"round {round_ + 1} {name:9s} start-up {result['startup_s']:6.2f} s  "
                    f"step {result['step_us']:8.1f} us  (process {result['process_s']:.1f} s)",
                    flush=True,
                )
    print(f"{NUM_ENVS} workers, medians of {args.rounds} rounds:")
    mpe = rows["mpe"]
    for name in ("ours cold", "ours warm", "mpe"):
        startup = statistics.median(r["startup_s"] for r in rows[name])
        step = statistics.median(r["step_us"] for r in rows[name])
        line = f"  {name:9s} start-up {startup:6.2f} s  step {step:8.1f} us"
        if name != "mpe":
            startup_ratio = statistics.median(
                a["startup_s"] / b["startup_s"] for a, b in zip(rows[name], mpe)
            )
            step_ratio = statistics.median(
                a["step_us"] / b["step_us"] for a, b in zip(rows[name], mpe)
            )
            line += f"  ours/MPE: start-up {startup_ratio:.2f}x, step {step_ratio:.2f}x"
        print(line)
    warm = statistics.median(r["startup_s"] for r in rows["ours warm"])
    limit = args.max_warm_ratio * statistics.median(r["startup_s"] for r in mpe) + 2.0
    print(f"warm start-up {warm:.2f} s within {limit:.2f} s: {warm <= limit}")
    return 0 if warm <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
