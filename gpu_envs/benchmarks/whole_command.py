"""What the user waits for: `gpu-envs train cartpole` as a whole process vs PureJaxRL's script.

    gpu-envs bench main-job --purejaxrl PUREJAXRL/purejaxrl \\
        --purejaxrl-python ../shared/peers/.venv/bin/python --rounds 3 --cold

Each round starts, from the shell's point of view, one fresh process of each side and times it from
start to exit (imports, compiling, evaluations, training, saving): ours is the README's main job,
``gpu-envs train cartpole --seed S`` (its folder in a temp dir); PureJaxRL's is its CartPole PPO
(``purejaxrl/ppo.py``'s own config, ``gpu_envs.benchmarks.purejaxrl_child``: jax import, the
jitted training compiled, 5e5 env steps), run by ``--purejaxrl-python``.

* warm: the caches a second run finds. Ours: numba's kernel cache and torch's compile caches where
  they live by default (one unmeasured run first fills them). PureJaxRL: JAX's persistent
  compilation cache in a folder of this bench (filled by an unmeasured run first).
* cold (``--cold``): a first run. Ours with ``NUMBA_CACHE_DIR`` and ``TORCHINDUCTOR_CACHE_DIR`` set
  to new empty folders (nothing compiled is found); PureJaxRL with an empty JAX cache folder.
  The operating system's file cache stays warm on both sides.

The two sides alternate within each round; the medians over the rounds and their ratios are
printed. Targets (issue 43): warm <= 0.5 x PureJaxRL's, cold <= 1 x.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpu_envs.benchmarks import machine, purejaxrl_child, report

TARGETS = {"warm": 0.5, "cold": 1.0}
_TRAINING_TIME = re.compile(r"training time: ([0-9.]+) s")
_BEST = re.compile(r"best evaluation: greedy mean return ([0-9.]+)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Where PureJaxRL and its interpreter are, the rounds, cold runs and ``--json``."""
    parser.add_argument("--purejaxrl", required=True, help="the purejaxrl/ folder of a clone")
    parser.add_argument(
        "--purejaxrl-python", required=True, help="an interpreter with jax, flax, optax, distrax"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="the seed of every run (default 1)")
    parser.add_argument(
        "--cold", action="store_true", help="also time first runs (empty compile caches)"
    )
    report.add_json_argument(parser, "every run and the summary")


def _gpu_envs_command() -> list[str]:
    """The ``gpu-envs`` script beside this interpreter (what a user's shell runs)."""
    script = Path(sys.executable).with_name("gpu-envs")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "gpu_envs.cli"]


def _timed(command: list[str], cwd: str, environ: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of ``command`` from start to exit, and its output; raises if it failed."""
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, env=environ, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}:\n{done.stderr}")
    return wall, done.stdout + done.stderr


def run_ours(seed: int, cold: bool) -> dict:
    """One ``gpu-envs train cartpole`` from the shell: wall seconds, training seconds, best eval."""
    with tempfile.TemporaryDirectory(prefix="main_job_") as tmp:
        environ = dict(os.environ)
        if cold:
            environ.update(
                NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
            )
        command = [*_gpu_envs_command(), "train", "cartpole", "--seed", str(seed)]
        wall, output = _timed(command, tmp, environ)
    training, best = _TRAINING_TIME.search(output), _BEST.search(output)
    return dict(
        wall_s=wall,
        train_s=float(training.group(1)) if training else None,
        best_eval=float(best.group(1)) if best else None,
    )


def run_purejaxrl(folder: str, python: str, seed: int, cache: str) -> dict:
    """One PureJaxRL CartPole training from the shell, JAX's compilation cache in ``cache``."""
    environ = dict(
        os.environ,
        JAX_COMPILATION_CACHE_DIR=cache,
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PLATFORMS="cpu",
    )
    command = [python, purejaxrl_child.__file__, folder, str(seed)]
    wall, output = _timed(command, tempfile.gettempdir(), environ)
    return dict(wall_s=wall, train_s=None, best_eval=None, child=output.strip().splitlines()[-1])


def summarize(runs: list[dict]) -> dict:
    """Median wall seconds per side and cache state, their ratios and the targets."""
    summary: dict[str, Any] = {}
    for cache in ("warm", "cold"):
        walls = {
            impl: [r["wall_s"] for r in runs if r["impl"] == impl and r["cache"] == cache]
            for impl in ("gpu_envs", "purejaxrl")
        }
        if not walls["gpu_envs"] or not walls["purejaxrl"]:
            continue
        ours, theirs = statistics.median(walls["gpu_envs"]), statistics.median(walls["purejaxrl"])
        summary[cache] = dict(
            gpu_envs_s=ours,
            purejaxrl_s=theirs,
            ratio=ours / theirs,
            target=TARGETS[cache],
            target_met=ours / theirs <= TARGETS[cache],
        )
    return summary


def markdown(runs: list[dict], summary: dict) -> str:
    """The runs, then per cache state the medians, the ratio and the target."""
    rows = [
        [
            r["cache"],
            r["impl"],
            str(r["round"]),
            f"{r['wall_s']:.1f}",
            report.fmt(r["train_s"], ".2f", "–"),
            report.fmt(r["best_eval"], ".2f", "–"),
            f"{r['loadavg_before']:.1f}",
        ]
        for r in runs
    ]
    table = report.markdown_table(
        ["caches", "impl", "round", "whole s", "training s", "best eval", "load"], rows
    )
    lines = [
        f"{cache}: gpu_envs {s['gpu_envs_s']:.1f} s, PureJaxRL {s['purejaxrl_s']:.1f} s, ratio "
        f"{s['ratio']:.2f} (target <= {s['target']}: {'met' if s['target_met'] else 'not met'})"
        for cache, s in summary.items()
    ]
    return table + "\n\n" + "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench main-job``."""
    if not (Path(args.purejaxrl) / "ppo.py").is_file():
        raise SystemExit(
            f"--purejaxrl {args.purejaxrl}: no ppo.py there (give the purejaxrl/ folder)"
        )
    out = sys.stderr if args.json == "-" else sys.stdout
    caches = ("warm", "cold") if args.cold else ("warm",)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="main_job_jax_") as jax_cache:
        print("filling the warm caches (one unmeasured run each) ...", file=out, flush=True)
        run_ours(args.seed, cold=False)
        run_purejaxrl(args.purejaxrl, args.purejaxrl_python, args.seed, jax_cache)
        for round_ in range(1, args.rounds + 1):
            for cache in caches:
                for impl in ("gpu_envs", "purejaxrl"):
                    with tempfile.TemporaryDirectory(prefix="main_job_cold_") as empty:
                        folder = jax_cache if cache == "warm" else empty
                        load = machine.load_average()
                        if impl == "gpu_envs":
                            result = run_ours(args.seed, cold=cache == "cold")
                        else:
                            result = run_purejaxrl(
                                args.purejaxrl, args.purejaxrl_python, args.seed, folder
                            )
                    runs.append(
                        dict(result, impl=impl, cache=cache, round=round_, loadavg_before=load)
                    )
                    print(
                        f"round {round_} {cache:4s} {impl:9s}: {result['wall_s']:.1f} s",
                        file=out,
                        flush=True,
                    )
    summary = summarize(runs)
    print(markdown(runs, summary), file=out)
    if args.json:
        report.write_json(
            dict(
                bench="main_job",
                date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                machine=machine.machine_info(),
                args=report.settings(args),
                runs=runs,
                summary=summary,
            ),
            args.json,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m`` entry point: parse ``argv`` and :func:`run`."""
    return report.command_line(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
