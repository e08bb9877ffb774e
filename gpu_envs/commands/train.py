"""``gpu-envs train PRESET|--config FILE [flags] [key=value ...]``: PPO/A2C on Lightning Fabric.

Ends by printing the experiment folder and the best checkpoint (``ckpt/ckpt_best.pth.tar``, kept by
the periodic greedy evaluation), or the latest one when no evaluation ran.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    """Add ``gpu-envs train`` with the trainer's options."""
    from gpu_envs.trainers import cli_args

    parser = subparsers.add_parser(
        "train",
        help="train policies with PPO/A2C on Lightning Fabric",
        description="Train with PPO/A2C on Lightning Fabric. Multi-process: --devices N "
        "--strategy ddp, or `fabric run --strategy ddp --devices N "
        "$(python -m gpu_envs.trainers.run --path) ...`. --print-config shows every config field "
        "(the KEY of KEY=VALUE); gpu_envs.trainers.config documents them and their rules.",
    )
    cli_args.add_arguments(parser)
    parser.set_defaults(func=run, accepts_extra=True)


def run(args: argparse.Namespace, extra: list[str] | None = None) -> int:
    """Train (``cli_args.train_from``), then say where the results are."""
    from gpu_envs.trainers import cli_args

    summary = cli_args.train_from(args, extra)
    if summary["experiment"] != str(None):  # rank 0 (the other ranks write no folder)
        print(results_message(Path(summary["experiment"])))
    return 0


def results_message(experiment: Path) -> str:
    """Where a finished run's experiment folder and best (or latest) checkpoint are."""
    best = experiment / "ckpt" / "ckpt_best.pth.tar"
    if best.is_file():
        checkpoint = f"best checkpoint: {best}"
    else:
        saved = sorted(
            (experiment / "ckpt").glob("iteration_*.pth.tar"),
            key=lambda p: int(p.name.split("_")[1].split(".")[0]),
        )
        checkpoint = "no best checkpoint (no evaluation ran: evaluation.eval_freq); " + (
            f"latest checkpoint: {saved[-1]}" if saved else "no checkpoint saved"
        )
    return f"experiment folder: {experiment}\n{checkpoint}"
