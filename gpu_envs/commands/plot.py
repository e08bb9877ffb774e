"""``gpu-envs plot RUN [RUN ...] --out curves.png``: learning curves of trainer runs as a PNG.

Each RUN is an experiment folder, or a folder of them (``experiments/cartpole_ppo``: its runs,
several seeds, drawn as their mean with a band from the lowest to the highest run). The PNG shows
the training episode return and the greedy evaluations against env steps and training time.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    """Add ``gpu-envs plot``."""
    parser = subparsers.add_parser(
        "plot",
        help="learning curves of trainer runs (PNG)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "runs", nargs="+", type=Path, metavar="RUN", help="experiment folder, or a folder of them"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("curves.png"), help="PNG to write (default curves.png)"
    )
    parser.add_argument("--title", default="", help="figure title")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the PNG, or exit with a one-line reason."""
    from importlib.util import find_spec

    if find_spec("matplotlib") is None:
        raise SystemExit("gpu-envs plot: error: needs matplotlib; pip install matplotlib")
    from gpu_envs.runs.curves import groups_of, plot_groups

    try:
        out = plot_groups(groups_of(args.runs), args.out, args.title)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"gpu-envs plot: error: {error}") from None
    print(f"wrote {out}")
    return 0
