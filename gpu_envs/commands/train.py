"""``gpu-envs train cartpole|tag|--config FILE [flags] [key=value ...]``: PPO/A2C on Lightning Fabric."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    from gpu_envs.trainers import cli_args

    parser = subparsers.add_parser(
        "train", help="train policies with PPO/A2C on Lightning Fabric",
        description="Train with PPO/A2C on Lightning Fabric. Multi-process: --devices N --strategy ddp, "
                    "or `fabric run --strategy ddp --devices N $(python -m gpu_envs.trainers.run --path) ...`.")
    cli_args.add_arguments(parser)
    parser.set_defaults(func=cli_args.run, accepts_extra=True)
