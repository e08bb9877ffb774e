"""``gpu-envs evaluate tag CHECKPOINT``: a trainer checkpoint's Tag teams against random ones.

Plays ``--episodes`` episodes (one game each, the same start states in every matchup) of the
checkpoint's Tag env for four matchups: random vs random, trained taggers vs random runners, random
taggers vs trained runners, trained vs trained. Prints the runners tagged per episode (mean ± standard
error) and the learning benchmark's ratios against their targets: tagger ratio >= 1.5, runner ratio
<= 2/3 (see ``gpu_envs.trainers.matchups``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("evaluate", help="score a trained checkpoint against random play")
    games = parser.add_subparsers(dest="game", required=True, metavar="GAME")
    tag = games.add_parser("tag", help="trained vs random Tag teams: runners tagged per episode")
    tag.add_argument("checkpoint", type=Path, help="trainer checkpoint (<experiment>/ckpt/*.pth.tar)")
    tag.add_argument("--episodes", type=int, default=100, help="episodes per matchup (one game each)")
    tag.add_argument("--seed", type=int, default=0, help="game i starts from seed + i; seeds the action draws")
    tag.add_argument("--greedy", action="store_true", help="trained teams take argmax actions (default: sampled)")
    tag.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    tag.add_argument("--json", type=Path, default=None, dest="json_path", help="also write the report here")
    tag.set_defaults(func=run_tag)


def run_tag(args: argparse.Namespace) -> int:
    from gpu_envs.trainers.matchups import evaluate_matchups

    if args.episodes <= 0:
        raise SystemExit(f"gpu-envs evaluate tag: --episodes must be >= 1, got {args.episodes}")
    try:
        report = evaluate_matchups(args.checkpoint, episodes=args.episodes, seed=args.seed,
                                   greedy=args.greedy, device=args.device)
    except (ValueError, RuntimeError) as error:  # CheckpointError is a RuntimeError
        raise SystemExit(f"gpu-envs evaluate tag: {error}") from None
    print(format_report(report))
    if args.json_path is not None:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
        print(f"wrote {args.json_path}")
    return 0


def format_report(report) -> str:
    """The matchup table and the two ratios with their targets, as text."""
    from gpu_envs.trainers.matchups import RUNNER_TARGET, TAGGER_TARGET

    actions = "greedy" if report.greedy else "sampled"
    width = max(len(r.name) for r in report.results)
    lines = [f"{report.checkpoint}: {report.episodes} episodes per matchup, seed {report.seed}, "
             f"{actions} actions of the trained teams",
             f"{'matchup':<{width}}  runners tagged per episode (mean ± s.e.)"]
    lines += [f"{r.name:<{width}}  {r.mean:8.3f} ± {r.stderr:.3f}" for r in report.results]
    lines += [
        _ratio_line("tagger ratio (trained taggers / random)", report.tagger_ratio, ">=", TAGGER_TARGET,
                    report.tagger_pass),
        _ratio_line("runner ratio (trained runners / random)", report.runner_ratio, "<=", RUNNER_TARGET,
                    report.runner_pass),
    ]
    return "\n".join(lines)


def _ratio_line(label: str, value: float, relation: str, target: float, passed: bool) -> str:
    return f"{label}: {value:.3f} (target {relation} {target:.3f}) {'PASS' if passed else 'FAIL'}"
