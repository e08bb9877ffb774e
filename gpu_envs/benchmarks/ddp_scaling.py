"""1 vs 2 DDP processes of `gpu-envs train cartpole`: env steps per second, in interleaved rounds.

    gpu-envs bench ddp --envs 64,1024 --rounds 3 --steps-per-process 4096 --json ddp.json
    python -m gpu_envs.benchmarks.ddp_scaling --envs 64,1024

Each configuration (processes x envs per process) is a fresh `gpu-envs train cartpole` command of
about ``--steps-per-process`` env steps per process (at least 2 iterations) with the preset's
settings (8 steps per env, 10 epochs of one minibatch, one torch thread per process; no
evaluation, not compiled, ``batch_scope: per_rank``), on the CPU (gloo) or with
``--accelerator cuda`` one GPU per process (NCCL). Its speed is the run's env steps (all ranks)
over its training seconds (the trainer's clock, from the first rollout: start-up excluded), read
from the final checkpoint.

The configurations run in rounds, each round in another order (a drift of a shared machine's load
hits them all); before each run the protocol waits (bounded) for a quiet machine and records the
background load and the load average beside it (:func:`gpu_envs.benchmarks.machine.run_when_quiet`).
Per envs per process, the table gives each process count's median and the ratio 2 / 1: the median
of the per-round ratios (:func:`gpu_envs.benchmarks.timing.median_ratio`), each round's beside it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from gpu_envs.benchmarks import machine, report, timing

#: The process counts compared.
PROCESSES = (1, 2)


def steps_per_env() -> int:
    """Env steps per env and iteration of the ``cartpole`` preset (its rollout's length)."""
    from gpu_envs.runs.presets import preset

    trainer = preset("cartpole")["trainer"]
    return trainer["train_batch_size"] // trainer["num_envs"]


def train_speed(
    processes: int, envs: int, iterations: int, basedir: Path, accelerator: str = "cpu"
) -> dict:
    """One run of ``iterations`` iterations of ``envs`` envs per process (a fresh command writing
    under ``basedir``): its env steps, training seconds and env steps per second.

    Raises:
        RuntimeError: the command failed; the message holds the end of its output.
    """
    import torch

    from gpu_envs.runs import checkpoint as ckpt

    steps = steps_per_env()
    tag = f"p{processes}_e{envs}"
    command = [
        sys.executable, "-m", "gpu_envs.cli", "train", "cartpole",
        "--accelerator", accelerator, "--devices", str(processes),
        "--strategy", "ddp" if processes > 1 else "auto",
        f"trainer.num_envs={envs}", f"trainer.train_batch_size={envs * steps}",
        f"trainer.total_timesteps={iterations * processes * envs * steps}",
        "trainer.compile=false", "trainer.progress_bar=false", "evaluation.eval_freq=0",
        "saving.console=none", f"saving.basedir={basedir}", f"saving.tag={tag}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-2000:]
        raise RuntimeError(
            f"`gpu-envs train` on {processes} process(es) x {envs} envs exited with "
            f"{done.returncode}: {tail}"
        )
    saved = ckpt.iteration_checkpoints(basedir / "cartpole_ppo" / tag / "ckpt")
    state = torch.load(saved[0], weights_only=True)
    seconds = state["counters"]["train_seconds"]
    return {
        "processes": processes,
        "envs_per_process": envs,
        "iterations": iterations,
        "accelerator": accelerator,
        "env_steps": state["env_step"],
        "train_seconds": seconds,
        "env_steps_per_s": state["env_step"] / seconds,
    }


def measure(
    envs: list[int],
    rounds: int,
    steps_per_process: int,
    accelerator: str = "cpu",
    max_wait: float = 0.0,
    quiet_threshold: float = machine.QUIET_THRESHOLD,
    say: Callable[[str], object] = print,
) -> list[dict]:
    """Every run, round by round (each round rotates the configurations' order); each run's record
    of :func:`train_speed` with ``round`` and the load around it."""
    configs = [(processes, n) for n in envs for processes in PROCESSES]
    runs = []
    for round_ in range(rounds):
        shift = round_ % len(configs)
        for processes, n in configs[shift:] + configs[:shift]:
            iterations = max(2, steps_per_process // (n * steps_per_env()))
            with tempfile.TemporaryDirectory() as folder:
                one_run = partial(train_speed, processes, n, iterations, Path(folder), accelerator)
                record = machine.run_when_quiet(one_run, max_wait, quiet_threshold)
            runs.append({"round": round_, **record})
            say(
                f"round {round_ + 1}: {processes} process(es) x {n} envs: "
                f"{record['env_steps_per_s']:,.0f} env steps/s "
                f"(background {report.format_share(record['background_busy_before'])})"
            )
    return runs


def summarize(runs: list[dict]) -> list[dict]:
    """Per envs per process: each process count's rates (in round order) and median, the ratio
    of 2 processes to 1 (the median of the per-round ratios) and the highest background load."""
    summary = []
    for envs in dict.fromkeys(r["envs_per_process"] for r in runs):
        mine = sorted((r for r in runs if r["envs_per_process"] == envs), key=lambda r: r["round"])
        rates = {p: [r["env_steps_per_s"] for r in mine if r["processes"] == p] for p in PROCESSES}
        one, two = ({"repeat_rates": rates[p]} for p in PROCESSES)
        loads = [load for r in mine if (load := r["background_busy_before"]) is not None]
        summary.append(
            {
                "envs_per_process": envs,
                **{f"median_{p}": statistics.median(rates[p]) for p in PROCESSES},
                "rates": {str(p): rates[p] for p in PROCESSES},
                "ratio": timing.median_ratio(two, one),
                "round_ratios": [b / a for a, b in zip(rates[1], rates[2])],
                "max_background_load": max(loads) if loads else None,
            }
        )
    return summary


def markdown(summary: list[dict]) -> str:
    """The summary as a Markdown table."""
    return report.markdown_table(
        [
            "envs per process",
            "1 process",
            "2 processes",
            "2 / 1",
            "each round's 2 / 1",
            "most background load",
        ],
        [
            [
                str(s["envs_per_process"]),
                f"{s['median_1']:,.0f}",
                f"{s['median_2']:,.0f}",
                f"{s['ratio']:.2f}",
                ", ".join(f"{ratio:.2f}" for ratio in s["round_ratios"]),
                report.format_share(s["max_background_load"]),
            ]
            for s in summary
        ],
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``gpu-envs bench ddp``."""
    parser.add_argument(
        "--envs",
        type=report.parse_int_list,
        default=[64, 1024],
        help="envs per process, comma-separated (64,1024)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every configuration (3)")
    parser.add_argument(
        "--steps-per-process",
        type=int,
        default=40_000,
        help="env steps of each process per run (40000; at least 2 iterations)",
    )
    parser.add_argument(
        "--accelerator",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cpu (gloo) or cuda (one GPU per process, NCCL)",
    )
    machine.add_quiet_arguments(parser)
    report.add_json_argument(parser, "every run and the summary")


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench ddp``: the runs, their table and the JSON record."""
    if args.rounds < 1 or args.steps_per_process < 1 or not args.envs:
        raise SystemExit(
            "gpu-envs bench ddp: --rounds and --steps-per-process must be >= 1 and --envs name "
            f"at least one size (got {args.rounds}, {args.steps_per_process}, {args.envs})"
        )
    out = sys.stderr if args.json == "-" else sys.stdout
    runs = measure(
        args.envs,
        args.rounds,
        args.steps_per_process,
        args.accelerator,
        args.max_wait,
        args.quiet_threshold,
        say=lambda text: print(text, file=out, flush=True),
    )
    summary = summarize(runs)
    info = machine.machine_info()
    print(
        f"\n{info['cpus']} CPUs ({info['cpu_model']}), {args.accelerator}, {args.rounds} "
        "round(s), medians (env steps per second)\n",
        file=out,
    )
    print(markdown(summary), file=out, flush=True)
    if args.json:
        record = dict(
            bench="ddp_scaling",
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            machine=info,
            args=report.settings(args),
            runs=runs,
            summary=summary,
        )
        report.write_json(record, args.json)
    return 0


def main(argv=None) -> int:
    """Command line: ``python -m gpu_envs.benchmarks.ddp_scaling``."""
    return report.command_line(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
