"""``gpu-envs bench GAME``: throughput (and time to train) of ours beside the peers, in one run."""

from __future__ import annotations

import importlib

BENCHMARKS = {
    "cartpole": "gpu_envs.benchmarks.cartpole",
    "pendulum": "gpu_envs.benchmarks.pendulum",
    "tag": "gpu_envs.benchmarks.tag",
    "sb3-ppo": "gpu_envs.benchmarks.sb3_ppo",
    "train-cartpole": "gpu_envs.benchmarks.train_cartpole",
    "train-pendulum": "gpu_envs.benchmarks.train_pendulum",
}


def add_parser(subparsers) -> None:
    """Add ``gpu-envs bench GAME``, one subcommand per benchmark module."""
    parser = subparsers.add_parser("bench", help="measure env-steps/s against the peers")
    games = parser.add_subparsers(dest="game", required=True, metavar="GAME")
    for game, module_name in BENCHMARKS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue
        game_parser = games.add_parser(game, help=module.__doc__.splitlines()[0])
        module.add_arguments(game_parser)
        game_parser.set_defaults(func=module.run)
