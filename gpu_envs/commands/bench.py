"""``gpu-envs bench GAME``: throughput (and time to train) of ours beside the peers, in one run."""

from __future__ import annotations

import importlib

from gpu_envs.games import GAMES

#: Benchmark name -> its module: each game's (``gpu_envs.games``: ``NAME`` and ``train-NAME``),
#: then SB3's PPO.
BENCHMARKS = {
    **{game.name: game.benchmark for game in GAMES.values() if game.benchmark},
    **{
        f"train-{game.name}": game.train_benchmark
        for game in GAMES.values()
        if game.train_benchmark
    },
    "sb3-ppo": "gpu_envs.benchmarks.sb3_ppo",
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
