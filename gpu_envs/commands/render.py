"""``gpu-envs render tag``: play one episode and write it as an animation (``.gif`` or ``.mp4``).

The env comes from ``--config FILE`` (YAML: the env parameters, or a run config whose ``env:``
section holds them) with the ``--num-taggers`` etc. flags on top. Actions are random, or come from
a trainer checkpoint with ``--checkpoint PATH``: every team plays its trained policy
(``gpu_envs.trainers.load_policy``), on the checkpoint's env parameters with ``--config`` and the
flags on top.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

# Flag -> SPEC-tag.md parameter name and type; the rest of the parameters come from --config.
_ENV_FLAGS = {
    "num_taggers": int,
    "num_runners": int,
    "grid_length": float,
    "episode_length": int,
}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("render", help="write an animation of an episode (.gif or .mp4)")
    games = parser.add_subparsers(dest="game", required=True, metavar="GAME")
    tag = games.add_parser("tag", help="one episode of Tag (random policy, or --checkpoint)")
    tag.add_argument("--config", type=Path, help="YAML file: Tag parameters, or a run config with an env: section")
    for name, kind in _ENV_FLAGS.items():
        tag.add_argument(f"--{name.replace('_', '-')}", dest=name, type=kind, default=None,
                         help=f"Tag parameter {name} (overrides --config)")
    tag.add_argument("--out", type=Path, required=True, help="output file, .gif or .mp4 (mp4 needs imageio-ffmpeg)")
    tag.add_argument("--seed", type=int, default=0, help="seed of the start state and the random policy")
    tag.add_argument("--steps", type=int, default=None, help="stop after this many steps (default: the whole episode)")
    tag.add_argument("--fps", type=float, default=25.0, help="frames per second of the animation")
    tag.add_argument("--size", type=int, default=480, help="frame width in pixels")
    tag.add_argument("--checkpoint", type=Path, default=None, help="trainer checkpoint whose policies to play")
    tag.set_defaults(func=run_tag)


def env_params_from(args: argparse.Namespace) -> dict[str, Any]:
    """Tag parameters: the ``--config`` file's, then the flags given on the command line."""
    params: dict[str, Any] = {}
    if args.config is not None:
        import yaml

        loaded = yaml.safe_load(args.config.read_text())
        if isinstance(loaded, dict) and isinstance(loaded.get("env"), dict):
            loaded = loaded["env"]
        if not isinstance(loaded, dict):
            raise SystemExit(f"{args.config}: expected a mapping of Tag parameters (or an env: section)")
        params.update(loaded)
    params.update({name: getattr(args, name) for name in _ENV_FLAGS if getattr(args, name) is not None})
    return params


def load_checkpoint_policy(path: Path):
    """The policy of every team stored in the trainer checkpoint at ``path``."""
    from gpu_envs.trainers import load_policy
    from gpu_envs.trainers.checkpoint import CheckpointError

    try:
        return load_policy(path)
    except CheckpointError as error:
        raise SystemExit(f"gpu-envs render tag: {error}") from None


def run_tag(args: argparse.Namespace) -> int:
    from gpu_envs.tag_rendering import VIDEO_SUFFIXES, render_episode

    if args.out.suffix.lower() not in VIDEO_SUFFIXES:
        raise SystemExit(f"--out must end in one of {VIDEO_SUFFIXES}, got {args.out}")
    policy = None if args.checkpoint is None else load_checkpoint_policy(args.checkpoint)
    params = env_params_from(args) if policy is None else {**policy.env_params, **env_params_from(args)}
    try:
        frames = render_episode(params, policy=policy, seed=args.seed, out=args.out,
                                steps=args.steps, fps=args.fps, size=args.size)
    except (ValueError, TypeError, RuntimeError) as error:
        raise SystemExit(f"gpu-envs render tag: {error}") from error
    print(f"wrote {args.out}: {len(frames)} frames")
    return 0
