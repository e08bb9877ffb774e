"""``gpu-envs evaluate GAME CHECKPOINT``: score a trainer checkpoint.

``evaluate cartpole`` (and every single-agent game of ``gpu_envs.games``: pendulum, acrobot,
mountaincar, mountaincar-continuous, and the registered ones) plays ``--episodes`` greedy episodes
(episode ``i`` from seed ``seed + i``) on the run's env and prints the mean return (± standard
error) against the game's ``solved_threshold``: gymnasium's reward threshold (CartPole-v1 475,
Acrobot-v1 -100, ...) or the bundled trainer's target (Pendulum -250). With ``--on-gymnasium``
the same greedy policy (the trainer's observation scaling and action clipping) plays gymnasium's
own env instead, ``gym.make`` of the id without ``gpu_envs/``, episode ``i`` reset with seed
``seed + i``: the score on the real thing, not on our batched copy of it. The report's first line
(and the JSON's ``env``) says which env played.

``evaluate tag`` plays ``--episodes`` episodes (one game each, the same start states in every
matchup) of the
checkpoint's Tag env for four matchups: random vs random, trained taggers vs random runners, random
taggers vs trained runners, trained vs trained. Prints the runners tagged per episode (mean ±
standard
error) and the learning benchmark's ratios, with whether each meets its target: tagger ratio >= 1.5,
runner ratio <= 2/3 (see ``gpu_envs.trainers.matchups``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpu_envs.games import GAMES, single_agent_games


def add_parser(subparsers) -> None:
    """Add ``gpu-envs evaluate GAME CHECKPOINT``, one subcommand per game (added when it runs:
    the registered games' entry points are loaded then)."""
    parser = subparsers.add_parser(
        "evaluate", help="score a trained checkpoint (greedy returns, Tag matchups)"
    )
    parser.setup = add_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One subcommand per game, with its arguments."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "checkpoint", type=Path, help="trainer checkpoint (<experiment>/ckpt/*.pth.tar)"
    )
    common.add_argument(
        "--episodes", type=int, default=100, help="episodes (per matchup for tag), one env each"
    )
    common.add_argument(
        "--seed", type=int, default=0, help="episode i starts from seed + i; seeds the action draws"
    )
    common.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    common.add_argument(
        "--json", type=Path, default=None, dest="json_path", help="also write the report here"
    )
    games = parser.add_subparsers(dest="game", required=True, metavar="GAME")
    for record in single_agent_games():
        single = games.add_parser(
            record.name, parents=[common], help="greedy mean return over seeded episodes"
        )
        if record.env_id.startswith("gpu_envs/"):  # a copy of a gymnasium env
            single.add_argument(
                "--on-gymnasium",
                action="store_true",
                help=f"play gymnasium's own {gymnasium_id(record.name)} instead",
            )
        single.set_defaults(func=run_single_agent)
    tag = games.add_parser(
        "tag", parents=[common], help="trained vs random Tag teams: runners tagged per episode"
    )
    tag.add_argument(
        "--greedy", action="store_true", help="trained teams take argmax actions (default: sampled)"
    )
    tag.set_defaults(func=run_tag)


def run_single_agent(args: argparse.Namespace) -> int:
    """Greedy returns of a single-agent game's checkpoint on seeded episodes."""
    from gpu_envs.trainers.scores import evaluate_checkpoint, returns_on

    on_gymnasium = getattr(args, "on_gymnasium", False)
    env = (
        f"gymnasium's own {gymnasium_id(args.game)} (gym.make, one episode at a time)"
        if on_gymnasium
        else f"{GAMES[args.game].env_id} (the run's env)"
    )

    def score():
        if on_gymnasium:
            return returns_on(
                gymnasium_id(args.game), args.checkpoint, args.game, args.episodes, args.seed
            )
        return evaluate_checkpoint(
            args.checkpoint,
            episodes=args.episodes,
            seed=args.seed,
            device=args.device,
            game=args.game,
        )

    report = _evaluate(args.game, args, score)
    data = {**report.to_dict(), "env": env}
    return _emit(format_returns(report, args.game, env), data, args.json_path)


def gymnasium_id(game: str) -> str:
    """The id of gymnasium's own env of which ``game`` is the batched copy."""
    return GAMES[game].env_id.removeprefix("gpu_envs/")


def run_tag(args: argparse.Namespace) -> int:
    """Tag matchups of a checkpoint's teams against random teams on seeded episodes."""
    from gpu_envs.trainers.matchups import evaluate_matchups

    report = _evaluate(
        "tag",
        args,
        lambda: evaluate_matchups(
            args.checkpoint,
            episodes=args.episodes,
            seed=args.seed,
            greedy=args.greedy,
            device=args.device,
        ),
    )
    return _emit(format_report(report), report.to_dict(), args.json_path)


def _evaluate(game: str, args: argparse.Namespace, evaluate):
    """``evaluate()`` with the argument and checkpoint errors turned into a one-line exit
    message."""
    if args.episodes <= 0:
        raise SystemExit(
            f"gpu-envs evaluate {game}: error: --episodes must be >= 1, got {args.episodes}"
        )
    try:
        return evaluate()
    except (ValueError, RuntimeError) as error:  # CheckpointError is a RuntimeError
        raise SystemExit(f"gpu-envs evaluate {game}: error: {error}") from None


def _emit(text: str, data: dict, json_path: Path | None) -> int:
    print(text)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {json_path}")
    return 0


def format_returns(report, game: str = "cartpole", env: str = "") -> str:
    """Each policy's greedy mean return, and whether it reaches the game's reference return (if
    it has one); ``env``: the env that played, named on the first line."""
    reference, what = GAMES[game].solved_threshold, GAMES[game].solved_what
    lines = [
        f"{report.checkpoint}: {report.episodes} greedy episodes"
        + (f" on {env}" if env else "")
        + f", seeds {report.seed}..{report.seed + report.episodes - 1}"
    ]
    for tag in report.returns:
        mean = report.mean(tag)
        line = f"{tag}: mean return {mean:.2f} ± {report.stderr(tag):.2f}"
        if reference is not None:
            reached = "reached" if mean >= reference else "not reached"
            line += f" ({what or 'solved at'} {reference:g}: {reached})"
        lines.append(line)
    return "\n".join(lines)


def format_report(report) -> str:
    """The matchup table and the two ratios with their targets, as text."""
    from gpu_envs.trainers.matchups import RUNNER_TARGET, TAGGER_TARGET

    actions = "greedy" if report.greedy else "sampled"
    width = max(len(r.name) for r in report.results)
    lines = [
        f"{report.checkpoint}: {report.episodes} episodes per matchup, seed {report.seed}, "
        f"{actions} actions of the trained teams",
        f"{'matchup':<{width}}  runners tagged per episode (mean ± s.e.)",
    ]
    lines += [f"{r.name:<{width}}  {r.mean:8.3f} ± {r.stderr:.3f}" for r in report.results]
    lines += [
        _ratio_line(
            "tagger ratio (trained taggers / random)",
            report.tagger_ratio,
            ">=",
            TAGGER_TARGET,
            report.tagger_pass,
        ),
        _ratio_line(
            "runner ratio (trained runners / random)",
            report.runner_ratio,
            "<=",
            RUNNER_TARGET,
            report.runner_pass,
        ),
    ]
    return "\n".join(lines)


def _ratio_line(label: str, value: float, relation: str, target: float, met: bool) -> str:
    return (
        f"{label}: {value:.3f} (target {relation} {target:.3f}): learning benchmark target "
        f"{'met' if met else 'not met'}"
    )
