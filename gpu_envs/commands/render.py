"""``gpu-envs render GAME``: play one episode and write it as an animation (``.gif`` or ``.mp4``).

``render cartpole CHECKPOINT`` (and every single-agent game of ``gpu_envs.games``, registered
ones included): one greedy episode of a trainer checkpoint's policy (seeded with ``--seed``) on its
run's env, at the game's ``render_fps``; prints the episode's return. A game whose env draws no
frames is drawn from its observations (``gpu_envs.trainers.played_episode``): by its record's
``draw_frame``, or as a plot of them over time.

``render tag [CHECKPOINT]``: the env comes from ``--config FILE`` (YAML: the env parameters, or a
run config whose ``env:``
section holds them) with the ``--num-taggers`` etc. flags on top. Actions are random, or come from
a trainer checkpoint (``CHECKPOINT``, or ``--checkpoint PATH``): every team plays its trained policy
(``gpu_envs.trainers.matchups.load_policy``), on the checkpoint's env parameters with ``--config``
and the
flags on top. Prints each team's return (the sum of its agents' rewards).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpu_envs.games import GAMES, single_agent_games

# Flag -> Tag parameter name (docs/spec-tag.md) and type; the rest of the parameters come from
# --config.
_ENV_FLAGS = {
    "num_taggers": int,
    "num_runners": int,
    "grid_length": float,
    "episode_length": int,
}


def add_parser(subparsers) -> None:
    """Add ``gpu-envs render GAME``, one subcommand per game (added when it runs: the registered
    games' entry points are loaded then)."""
    parser = subparsers.add_parser("render", help="write an animation of an episode (.gif or .mp4)")
    parser.setup = add_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One subcommand per game, with its arguments."""
    games = parser.add_subparsers(dest="game", required=True, metavar="GAME")
    for record in single_agent_games():
        name, fps = record.name, record.render_fps
        single = games.add_parser(name, help=f"one greedy episode of a trained {name} policy")
        single.add_argument(
            "checkpoint", type=Path, help="trainer checkpoint (<experiment>/ckpt/*.pth.tar)"
        )
        single.add_argument(
            "--out",
            type=Path,
            required=True,
            help="output file, .gif or .mp4 (mp4 needs imageio-ffmpeg)",
        )
        single.add_argument("--seed", type=int, default=0, help="seed of the start state (0)")
        single.add_argument(
            "--fps", type=float, default=fps, help=f"frames per second of the animation ({fps:g})"
        )
        single.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
        single.set_defaults(func=run_single_agent)
    tag = games.add_parser(
        "tag", help="one episode of Tag (random policy, or a checkpoint's policies)"
    )
    tag.add_argument(
        "checkpoint_path",
        nargs="?",
        type=Path,
        default=None,
        metavar="CHECKPOINT",
        help="trainer checkpoint whose policies to play (default: random play)",
    )
    tag.add_argument(
        "--config",
        type=Path,
        help="YAML file: Tag parameters, or a run config with an env: section",
    )
    for name, kind in _ENV_FLAGS.items():
        tag.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=kind,
            default=None,
            help=f"Tag parameter {name} (overrides --config)",
        )
    tag.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output file, .gif or .mp4 (mp4 needs imageio-ffmpeg)",
    )
    tag.add_argument(
        "--seed", type=int, default=0, help="seed of the start state and the random policy"
    )
    tag.add_argument(
        "--steps",
        type=int,
        default=None,
        help="stop after this many steps (default: the whole episode)",
    )
    tag.add_argument(
        "--fps",
        type=float,
        default=GAMES["tag"].render_fps,
        help="frames per second of the animation",
    )
    tag.add_argument("--size", type=int, default=480, help="frame width in pixels")
    tag.add_argument("--checkpoint", type=Path, default=None, help="the same as CHECKPOINT")
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
            raise SystemExit(
                f"gpu-envs render tag: error: {args.config}: expected a mapping of Tag "
                "parameters (or an env: section)"
            )
        params.update(loaded)
    params.update(
        {name: getattr(args, name) for name in _ENV_FLAGS if getattr(args, name) is not None}
    )
    return params


def load_checkpoint_policy(path: Path):
    """The policy of every team stored in the trainer checkpoint at ``path``."""
    from gpu_envs.runs.checkpoint import CheckpointError
    from gpu_envs.trainers.matchups import load_policy

    try:
        return load_policy(path)
    except CheckpointError as error:
        raise SystemExit(f"gpu-envs render tag: error: {error}") from None


def check_out(path: Path) -> None:
    """Exit with a message unless a video can be written to ``path`` (its suffix, the optional
    packages it needs), before any work; keep SDL's audio quiet for the renderers."""
    from gpu_envs.engine.rendering import quiet_sdl
    from gpu_envs.games.tag.rendering import VIDEO_SUFFIXES, check_animation_path

    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise SystemExit(
            f"gpu-envs render: error: --out must end in one of {VIDEO_SUFFIXES}, got {path}"
        )
    try:
        check_animation_path(path)
    except RuntimeError as error:
        raise SystemExit(f"gpu-envs render: error: {error}") from None
    quiet_sdl()


def run_single_agent(args: argparse.Namespace) -> int:
    """Write a video of one greedy episode of a single-agent game's checkpoint."""
    from gpu_envs.trainers.evaluation import record_video
    from gpu_envs.trainers.played_episode import DrawnFrames, ReturnCounter, draws_frames
    from gpu_envs.trainers.scores import load_trained_game

    check_out(args.out)
    record = GAMES[args.game]
    try:
        own_frames = draws_frames(record)
        game, groups = load_trained_game(
            args.checkpoint,
            1,
            args.device,
            game=args.game,
            render_mode="rgb_array" if own_frames else None,
        )
        try:
            played = ReturnCounter(game) if own_frames else DrawnFrames(game, record)
            path = record_video(played, groups, args.out, fps=args.fps, seed=args.seed)
        finally:
            game.close()
    except (ValueError, RuntimeError) as error:  # CheckpointError is a RuntimeError
        raise SystemExit(f"gpu-envs render {args.game}: error: {error}") from None
    print(f"wrote {path}" + ("" if own_frames else f": {played.how}"))
    print(f"episode return {played.total:.2f} over {played.steps} steps (seed {args.seed})")
    return 0


def run_tag(args: argparse.Namespace) -> int:
    """Write an animation of a Tag episode (random teams, or a checkpoint's policies)."""
    from gpu_envs.games.tag.rendering import animate_episode, save_animation
    from gpu_envs.games.tag.replay import play_episode

    check_out(args.out)
    if args.checkpoint_path is not None and args.checkpoint is not None:
        raise SystemExit(
            "gpu-envs render tag: error: give the checkpoint once (CHECKPOINT or --checkpoint)"
        )
    checkpoint = args.checkpoint_path or args.checkpoint
    policy = None if checkpoint is None else load_checkpoint_policy(checkpoint)
    params = (
        env_params_from(args) if policy is None else {**policy.env_params, **env_params_from(args)}
    )
    try:
        episode = play_episode(params, policy, args.seed, args.steps)
        frames = animate_episode(episode, size=args.size)
        save_animation(frames, args.out, fps=args.fps)
    except (ValueError, TypeError, RuntimeError) as error:
        raise SystemExit(f"gpu-envs render tag: error: {error}") from error
    print(f"wrote {args.out}: {len(frames)} frames")
    print(tag_returns(episode))
    return 0


def tag_returns(episode: dict[str, Any]) -> str:
    """The line of each team's return in a played Tag episode (``play_episode``'s record)."""
    rewards, taggers = episode["rewards"], episode["num_taggers"]
    runners = rewards.shape[1] - taggers
    return (
        f"episode returns over {rewards.shape[0]} steps: taggers ({taggers}) "
        f"{rewards[:, :taggers].sum():.2f}, runners ({runners}) {rewards[:, taggers:].sum():.2f}"
    )
