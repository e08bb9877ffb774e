"""``gpu-envs train PRESET|--config FILE [flags] [key=value ...]``: PPO/A2C on Lightning Fabric.

Ends by printing the experiment folder and the best checkpoint (``ckpt/ckpt_best.pth.tar``, kept by
the periodic greedy evaluation), or the latest one when no evaluation ran.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    """Add ``gpu-envs train`` with the trainer's options (added when it runs: they import torch)."""
    parser = subparsers.add_parser(
        "train",
        help="train policies with PPO/A2C on Lightning Fabric",
        description="Train with PPO/A2C on Lightning Fabric. Multi-process: --devices N "
        "--strategy ddp, or `fabric run --strategy ddp --devices N "
        "$(python -m gpu_envs.trainers.run --path) ...`. --print-config shows every config field "
        "(the KEY of KEY=VALUE); gpu_envs.trainers.config documents them and their rules.",
    )
    parser.setup = _add_arguments
    parser.set_defaults(func=run, accepts_extra=True)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from gpu_envs.trainers import cli_args

    cli_args.add_arguments(parser)


def run(args: argparse.Namespace, extra: list[str] | None = None) -> int:
    """Train (``cli_args.train_from``), then say where the results are, or how to resume."""
    from gpu_envs.trainers import cli_args

    summary = cli_args.train_from(args, extra)
    if summary["status"] == "finished" and summary["experiment"] != str(None):  # rank 0
        print(results_message(Path(summary["experiment"]), summary))
    return cli_args.exit_code(summary)


def results_message(experiment: Path, summary: dict | None = None) -> str:
    """Where a finished run's experiment folder and best (or latest) checkpoint are; with the
    run's ``summary``, why it ended and the command that scores the best checkpoint again."""
    best = experiment / "ckpt" / "ckpt_best.pth.tar"
    reason = f" ({summary['reason']})" if summary else ""
    if best.is_file():
        checkpoint = _evaluate_hint(summary) + f"best checkpoint: {best}"
    else:
        saved = sorted(
            (experiment / "ckpt").glob("iteration_*.pth.tar"),
            key=lambda p: int(p.name.split("_")[1].split(".")[0]),
        )
        checkpoint = "no best checkpoint (no evaluation ran: evaluation.eval_freq); " + (
            f"latest checkpoint: {saved[-1]}" if saved else "no checkpoint saved"
        )
    return f"experiment folder: {experiment}{reason}\n{checkpoint}"


def _evaluate_hint(summary: dict | None) -> str:
    """The best evaluation's line, with the command that prints it again (the same episodes)."""
    if not summary or "evaluate_command" not in summary:
        return ""
    return (
        f"best evaluation: greedy mean return {summary['best_eval']:.2f}; "
        f"`{summary['evaluate_command']}` prints the same\n"
    )
