"""Script entry of the trainer for launchers that take a file path, such as ``fabric run``.

    fabric run --strategy ddp --devices 2 --accelerator cpu \\
        "$(python -m gpu_envs.trainers.run --path)" cartpole trainer.total_timesteps=100000

also runs directly: ``python -m gpu_envs.trainers.run cartpole`` (the same arguments as
``gpu-envs train``). ``--path`` prints this file's path and exits.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--path"]:
        print(__file__)
        return 0
    from gpu_envs.trainers import cli_args

    parser = argparse.ArgumentParser(
        prog="gpu_envs.trainers.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli_args.add_arguments(parser)
    args, extra = parser.parse_known_args(argv)
    return cli_args.run(args, extra)


if __name__ == "__main__":
    sys.exit(main())
