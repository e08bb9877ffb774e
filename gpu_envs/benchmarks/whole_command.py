"""The main job as a user waits for it: `gpu-envs train cartpole` as a whole process vs PureJaxRL's
script; the ``main-job`` part of ``gpu-envs bench felt`` (:mod:`gpu_envs.benchmarks.felt_speed`).

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

The two sides alternate within each round (which one goes first alternating from round to round);
the medians over the rounds and their ratios are printed. Targets (issue 43): warm <= 0.5 x
PureJaxRL's, cold <= 1 x.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpu_envs.benchmarks import machine, purejaxrl_child, report

#: Issue 43's targets: the whole process warm and cold, the training clock to 475.
TARGETS = {"warm": 0.5, "cold": 1.0, "training": 0.6}
_TRAINING_TIME = re.compile(r"training time: ([0-9.]+) s")
_BEST = re.compile(r"best evaluation: greedy mean return ([0-9.]+)")


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
    child = json.loads(output.strip().splitlines()[-1])
    return dict(wall_s=wall, train_s=child["train_s"], best_eval=child["best_eval"], child=child)


def summarize(runs: list[dict]) -> dict:
    """Per measure, the two sides' medians, their ratio and its target: ``warm`` and ``cold``, the
    whole process's wall seconds with those caches; ``training``, the training clock's seconds to
    475 of every run (ours: the training time the command prints, to the update whose evaluation
    reached 475; PureJaxRL's: its child's ``train_s``, the run's seconds up to the first update
    whose curve point reached 475)."""
    measures = {
        "warm": ("wall_s", lambda r: r["cache"] == "warm"),
        "cold": ("wall_s", lambda r: r["cache"] == "cold"),
        "training": ("train_s", lambda r: r["train_s"] is not None),
    }
    summary: dict[str, Any] = {}
    for name, (field, chosen) in measures.items():
        values = {
            impl: [r[field] for r in runs if r["impl"] == impl and chosen(r)]
            for impl in ("gpu_envs", "purejaxrl")
        }
        if not values["gpu_envs"] or not values["purejaxrl"]:
            continue
        ours, theirs = statistics.median(values["gpu_envs"]), statistics.median(values["purejaxrl"])
        summary[name] = dict(
            gpu_envs_s=ours,
            purejaxrl_s=theirs,
            ratio=ours / theirs,
            target=TARGETS[name],
            target_met=ours / theirs <= TARGETS[name],
        )
    return summary


def markdown(runs: list[dict], summary: dict) -> str:
    """The runs, then per measure the medians, the ratio and the target."""
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
        f"{cache}: gpu_envs {s['gpu_envs_s']:.2f} s, PureJaxRL {s['purejaxrl_s']:.2f} s, ratio "
        f"{s['ratio']:.2f} (target <= {s['target']}: {'met' if s['target_met'] else 'not met'})"
        for cache, s in summary.items()
    ]
    return table + "\n\n" + "\n".join(lines)


def check_purejaxrl(folder: str, python: str) -> None:
    """Refuse a PureJaxRL folder without ``ppo.py`` or an interpreter that is not a file."""
    if not (Path(folder) / "ppo.py").is_file():
        raise SystemExit(f"--purejaxrl {folder}: no ppo.py there (give the purejaxrl/ folder)")
    if not Path(python).is_file():
        raise SystemExit(f"--purejaxrl-python {python}: no such interpreter")


def fill_warm_caches(folder: str, python: str, seed: int, jax_cache: str) -> None:
    """One unmeasured run of each side: what a second run finds in the caches."""
    run_ours(seed, cold=False)
    run_purejaxrl(folder, python, seed, jax_cache)


def play_round(
    round_: int, caches: tuple[str, ...], folder: str, python: str, seed: int, jax_cache: str
) -> list[dict]:
    """One round: per cache state one run of each side, which goes first alternating by round;
    a run's record is its result with ``impl``, ``cache``, ``round`` and ``loadavg_before``."""
    impls = ("gpu_envs", "purejaxrl") if round_ % 2 else ("purejaxrl", "gpu_envs")
    runs = []
    for cache in caches:
        for impl in impls:
            with tempfile.TemporaryDirectory(prefix="main_job_cold_") as empty:
                load = machine.load_average()
                if impl == "gpu_envs":
                    result = run_ours(seed, cold=cache == "cold")
                else:
                    jax_folder = jax_cache if cache == "warm" else empty
                    result = run_purejaxrl(folder, python, seed, jax_folder)
            runs.append(dict(result, impl=impl, cache=cache, round=round_, loadavg_before=load))
    return runs
