"""Time to 475 on CartPole-v1: `gpu-envs train cartpole` vs PureJaxRL's `ppo.py` on CPU JAX.

    gpu-envs bench train-cartpole-purejaxrl --purejaxrl PUREJAXRL/purejaxrl \\
        --purejaxrl-python ../shared/peers/.venv/bin/python --seeds 1,2,3,4,5

PureJaxRL is not a package: ``--purejaxrl`` is the ``purejaxrl/`` folder of a clone of
github.com/luchris429/purejaxrl, run by ``--purejaxrl-python``, an interpreter with jax, flax,
optax, distrax and gymnax (the peers harness's venv plus ``pip install distrax``). Each run is a
fresh process (``gpu_envs.benchmarks.purejaxrl_child``: PureJaxRL's own config and curve), the two
implementations alternating per seed, each after a bounded wait for a quiet machine.

* gpu_envs: the ``cartpole`` preset as ``bench train-cartpole`` runs it: training seconds (no
  compile, no greedy evaluations) to the end of the update whose greedy evaluation first reached
  475, and its env-steps/s over those seconds (over the whole run when it never reached 475).
* PureJaxRL: the jitted training of 5e5 steps (compile apart); time to 475 = run seconds x the share
  of updates up to the first whose curve point (mean of ``returned_episode_returns``) reaches 475;
  env-steps/s over the whole run.

Target (issue 36): median time to 475 of gpu_envs <= 0.25 x PureJaxRL's. The env-steps/s ratio is
reported beside it: the two reach 475 after very different numbers of env steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpu_envs.benchmarks import machine, purejaxrl_child, report, timing
from gpu_envs.benchmarks.train_cartpole import BENCH as OURS

IMPLEMENTATIONS = ("gpu_envs", "purejaxrl")
TARGET_RATIO = 0.25


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The bench's arguments: where PureJaxRL and its interpreter are, the seeds, our overrides,
    the quiet-machine wait and ``--json``."""
    parser.add_argument("--purejaxrl", required=True, help="the purejaxrl/ folder of a clone")
    parser.add_argument(
        "--purejaxrl-python", required=True, help="an interpreter with jax, flax, optax, distrax"
    )
    parser.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated seeds")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for `gpu-envs train cartpole` (repeatable)",
    )
    machine.add_quiet_arguments(parser)
    report.add_json_argument(parser, "every run, the summary and the machine")


def run_purejaxrl(folder: str, python: str, seed: int) -> dict:
    """One PureJaxRL training in a fresh process of ``python``."""
    command = [python, purejaxrl_child.__file__, folder, str(seed)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"PureJaxRL seed {seed} exited with {done.returncode}:\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarize(runs: list[dict]) -> dict:
    """Medians over the seeds (a seed that never reached 475 counts as infinitely slow) and the
    target check."""

    def median(impl: str, key: str) -> float | None:
        values = [r[key] if r[key] is not None else float("inf") for r in runs if r["impl"] == impl]
        value = statistics.median(values)
        return None if value == float("inf") else value

    ours, theirs = median("gpu_envs", "train_s"), median("purejaxrl", "train_s")
    ratio = ours / theirs if ours is not None and theirs else None
    rates = {impl: median(impl, "env_steps_per_s") for impl in IMPLEMENTATIONS}
    ours_rate, their_rate = rates["gpu_envs"], rates["purejaxrl"]
    assert ours_rate is not None and their_rate is not None  # every run has a finite rate
    return dict(
        median_train_s=dict(gpu_envs=ours, purejaxrl=theirs),
        median_steps=dict(
            gpu_envs=median("gpu_envs", "steps"), purejaxrl=median("purejaxrl", "steps")
        ),
        median_env_steps_per_s=rates,
        time_ratio=ratio,
        throughput_ratio=ours_rate / their_rate,
        target_ratio=TARGET_RATIO,
        target_met=ratio is not None and ratio <= TARGET_RATIO,
    )


def markdown(runs: list[dict], summary: dict) -> str:
    """The runs as a table, then the medians, both ratios and the target check."""
    rows = [
        [
            r["impl"],
            str(r["seed"]),
            report.fmt(r["train_s"], ".2f"),
            report.fmt(r["steps"], ",d"),
            f"{r['env_steps_per_s']:,.0f}",
            f"{r['loadavg_before']:.1f}",
        ]
        for r in runs
    ]
    table = report.markdown_table(
        ["impl", "seed", "train s to 475", "env steps then", "env-steps/s", "load"],
        rows,
    )
    s, met = summary, "met" if summary["target_met"] else "not met"
    return (
        f"{table}\n\nmedians: gpu_envs {report.fmt(s['median_train_s']['gpu_envs'], '.2f')} s / "
        f"{report.fmt(s['median_steps']['gpu_envs'], ',.0f')} steps / "
        f"{s['median_env_steps_per_s']['gpu_envs']:,.0f} env-steps/s; PureJaxRL "
        f"{report.fmt(s['median_train_s']['purejaxrl'], '.2f')} s / "
        f"{report.fmt(s['median_steps']['purejaxrl'], ',.0f')} steps / "
        f"{s['median_env_steps_per_s']['purejaxrl']:,.0f} env-steps/s\n"
        f"time to 475, gpu_envs / PureJaxRL: {report.fmt(s['time_ratio'], '.3f')} (target <= "
        f"{TARGET_RATIO}: {met}); env-steps/s, gpu_envs / PureJaxRL: {s['throughput_ratio']:.2f}"
    )


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench train-cartpole-purejaxrl``."""
    if not (Path(args.purejaxrl) / "ppo.py").is_file():
        raise SystemExit(
            f"--purejaxrl {args.purejaxrl}: no ppo.py there (give the purejaxrl/ folder)"
        )
    record: dict[str, Any] = dict(
        bench="train_cartpole_purejaxrl",
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=machine.machine_info(),
        args=report.settings(args),
    )
    runs, out = [], sys.stderr if args.json == "-" else sys.stdout
    for seed, impl in timing.alternating(report.parse_int_list(args.seeds, 0), IMPLEMENTATIONS):

        def one(impl=impl, seed=seed) -> dict:
            if impl == "gpu_envs":
                result = OURS.run_ours(seed, args.override)
                steps, seconds = (
                    (result["steps"], result["train_s"])
                    if result["train_s"]
                    else (result["total_steps"], result["total_train_s"])
                )
                result["env_steps_per_s"] = steps / seconds
            else:
                result = run_purejaxrl(args.purejaxrl, args.purejaxrl_python, seed)
            return {**result, "impl": impl, "seed": seed}

        r = machine.run_when_quiet(one, args.max_wait, args.quiet_threshold)
        runs.append(r)
        print(
            f"{impl:9s} seed {seed}: {report.fmt(r['train_s'], '.2f')} s to 475 "
            f"({r['env_steps_per_s']:,.0f} env-steps/s)",
            file=out,
            flush=True,
        )
    record.update(runs=runs, summary=summarize(runs))
    print(markdown(runs, record["summary"]), file=out)
    if args.json:
        report.write_json(record, args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m`` entry point: parse ``argv`` and :func:`run`."""
    return report.command_line(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
