"""``gpu-envs bench GAME``: throughput (and time to train) of ours beside the peers, in one run."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
from functools import partial
from pathlib import Path

from gpu_envs.cli import DeferredParser
from gpu_envs.games import GAMES

#: Benchmark name -> its module: each game's (``gpu_envs.games``: ``NAME`` and ``train-NAME``),
#: then SB3's PPO, DDP scaling, the step's overhead, training against PureJaxRL, and the speed a
#: user feels (the whole main job, one env, worker processes) against the peers.
BENCHMARKS = {
    **{game.name: game.benchmark for game in GAMES.values() if game.benchmark},
    **{
        f"train-{game.name}": game.train_benchmark
        for game in GAMES.values()
        if game.train_benchmark
    },
    "sb3-ppo": "gpu_envs.benchmarks.sb3_ppo",
    "ddp": "gpu_envs.benchmarks.ddp_scaling",
    "overhead": "gpu_envs.benchmarks.step_overhead",
    "felt": "gpu_envs.benchmarks.felt_speed",
    "train-cartpole-purejaxrl": "gpu_envs.benchmarks.train_cartpole_purejaxrl",
}


def _add_benchmark(module_name: str, parser: argparse.ArgumentParser) -> None:
    """A benchmark's arguments, imported only when it runs (numpy, torch, the peers)."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            raise
        parser.error(f"needs the package {error.name!r}: pip install {error.name}")
    module.add_arguments(parser)
    parser.set_defaults(func=module.run)


def _summary(module_name: str) -> str:
    """The first line of a module's docstring, read without importing it."""
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None, module_name
    docstring = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8")))
    return (docstring or module_name).splitlines()[0]


def add_parser(subparsers) -> None:
    """Add ``gpu-envs bench GAME``, one subcommand per benchmark module."""
    parser = subparsers.add_parser("bench", help="measure env-steps/s against the peers")
    games = parser.add_subparsers(
        dest="game", required=True, metavar="GAME", parser_class=DeferredParser
    )
    for game, module_name in BENCHMARKS.items():
        games.add_parser(game, help=_summary(module_name)).setup = partial(
            _add_benchmark, module_name
        )
