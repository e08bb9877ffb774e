"""One env and worker processes as a user feels them: ours against gymnasium's, per step.

    gpu-envs bench felt-speed
    gpu-envs bench felt-speed --games CartPole-v1 --steps 20000 --rounds 5 --workers 2

Two parts, in this one process, in interleaved rounds (each round times ours and gymnasium's
once each, which one goes first alternating from round to round); a row's time per step is the
median over the rounds, its ratio the median of the per-round ratios (ours / gymnasium's: below
1.00x ours is faster), so a drift of a shared machine's speed cancels out.

- ``single``: ``gym.make("gpu_envs/<id>")`` against ``gym.make("<id>")`` (both with gymnasium's
  wrappers), ``--steps`` random actions drawn before the clock from the action space (seeded),
  ``reset()`` whenever an episode ends: what a loop over one env (Tianshou's, SB3's) pays per step.
- ``workers``: ``gymnasium.vector.AsyncVectorEnv`` of ``--workers`` processes holding one
  ``gym.make`` env each, ``--worker-steps`` steps of random actions (the vector env autoresets):
  the time of one step of all workers (SB3's ``SubprocVecEnv``, RLlib's env runners, AgileRL's
  subprocess games have this shape).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

from gpu_envs.benchmarks import machine, report

#: gymnasium's classic games, each also registered as ``gpu_envs/<id>``.
CLASSIC_GAMES = (
    "CartPole-v1",
    "Pendulum-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
)
SIDES = ("ours", "gymnasium")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``gpu-envs bench felt-speed``."""
    parser.add_argument(
        "--games",
        type=partial(report.parse_name_list, allowed=CLASSIC_GAMES),
        default=",".join(CLASSIC_GAMES),
        help="comma-separated gymnasium ids of the single part (default: every classic game)",
    )
    parser.add_argument(
        "--steps", type=int, default=20_000, help="steps of one env per round (%(default)s)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (%(default)s)")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="processes of the workers part, one env each (%(default)s; 0 skips the part)",
    )
    parser.add_argument(
        "--worker-games",
        type=partial(report.parse_name_list, allowed=CLASSIC_GAMES),
        default="CartPole-v1",
        help="comma-separated gymnasium ids of the workers part (default %(default)s)",
    )
    parser.add_argument(
        "--worker-steps",
        type=int,
        default=2_000,
        help="steps of the vector env per round in the workers part (%(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of envs and actions (0)")
    report.add_json_argument(parser, "every record")


def single_loop(env_id: str, steps: int, seed: int) -> Callable[[], float]:
    """A function that plays ``steps`` random steps of ``gym.make(env_id)`` (resetting at each
    episode's end) and returns the seconds they took; the env and its actions are made here."""
    import gymnasium as gym

    import gpu_envs  # noqa: F401  (registers gpu_envs/<id>)

    env = gym.make(env_id)
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(steps)]
    env.reset(seed=seed)
    step, reset = env.step, env.reset

    def play() -> float:
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = step(action)
            if terminated or truncated:
                reset()
        return time.perf_counter() - start

    play()  # warm-up: compiled code loaded, caches warm
    return play


def workers_loop(env_id: str, workers: int, steps: int, seed: int) -> tuple[Callable, Callable]:
    """``(play, close)``: ``play()`` steps an ``AsyncVectorEnv`` of ``workers`` processes with one
    ``gym.make(env_id)`` each ``steps`` times on random actions and returns the seconds it took."""
    import gymnasium as gym

    def make_env() -> gym.Env:
        import gpu_envs  # noqa: F401  (a spawned worker registers the ids itself)

        return gym.make(env_id)

    envs = gym.vector.AsyncVectorEnv([make_env] * workers)
    envs.action_space.seed(seed)
    actions = [envs.action_space.sample() for _ in range(steps)]
    envs.reset(seed=seed)

    def play() -> float:
        start = time.perf_counter()
        for action in actions:
            envs.step(action)
        return time.perf_counter() - start

    play()  # warm-up
    return play, envs.close


def measure_rounds(plays: dict[str, Callable[[], float]], rounds: int, steps: int) -> dict:
    """µs per step of each side in ``rounds`` interleaved rounds: per side the median and the
    per-round figures, and the median of the per-round ratios ours / gymnasium's."""
    per_round: dict[str, list[float]] = {side: [] for side in plays}
    for number in range(rounds):
        order = list(plays) if number % 2 == 0 else list(reversed(plays))
        for side in order:
            per_round[side].append(1e6 * plays[side]() / steps)
    ratios = [o / g for o, g in zip(per_round["ours"], per_round["gymnasium"])]
    return {
        **{f"{side}_us": statistics.median(values) for side, values in per_round.items()},
        "ratio": statistics.median(ratios),
        "rounds_us": per_round,
    }


def measure_single(env_id: str, args: argparse.Namespace) -> dict:
    """The ``single`` part's record of ``env_id``."""
    plays = {
        side: single_loop(f"gpu_envs/{env_id}" if side == "ours" else env_id, args.steps, args.seed)
        for side in SIDES
    }
    return {"part": "single", "game": env_id, **measure_rounds(plays, args.rounds, args.steps)}


def measure_workers(env_id: str, args: argparse.Namespace) -> dict:
    """The ``workers`` part's record of ``env_id``."""
    plays, closes = {}, []
    try:
        for side in SIDES:
            name = f"gpu_envs/{env_id}" if side == "ours" else env_id
            plays[side], close = workers_loop(name, args.workers, args.worker_steps, args.seed)
            closes.append(close)
        measured = measure_rounds(plays, args.rounds, args.worker_steps)
    finally:
        for close in closes:
            close()
    return {"part": "workers", "game": env_id, "workers": args.workers, **measured}


def format_table(records: list[dict]) -> str:
    """The Markdown table of every record: µs per step of each side and the ratio."""
    rows = [
        [
            record["game"],
            "1 env" if record["part"] == "single" else f"{record['workers']} workers x 1 env",
            f"{record['ours_us']:.1f}",
            f"{record['gymnasium_us']:.1f}",
            f"{record['ratio']:.2f}x",
        ]
        for record in records
    ]
    header = ["game", "shape", "ours µs / step", "gymnasium µs / step", "ours / gymnasium"]
    return report.markdown_table(header, rows)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench felt-speed``."""
    for name in ("steps", "rounds", "worker_steps"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.workers < 0:
        raise SystemExit(f"--workers must be >= 0, got {args.workers}")
    out = sys.stderr if args.json == "-" else sys.stdout
    started = datetime.datetime.now().astimezone()
    info = machine.machine_info()
    notes = [f"load average {os.getloadavg()[0]:.1f} at the start", f"CPU {info['cpu_model']}"]
    records = []
    for env_id in args.games:
        records.append(measure_single(env_id, args))
        _log(records[-1])
    for env_id in args.worker_games if args.workers else ():
        records.append(measure_workers(env_id, args))
        _log(records[-1])
    notes.append(f"load average {os.getloadavg()[0]:.1f} at the end")
    print(format_table(records), file=out, flush=True)
    for note in notes:
        print(f"note: {note}", file=out, flush=True)
    if args.json is not None:
        document = {
            "benchmark": "felt-speed",
            "date": started.isoformat(timespec="seconds"),
            "command": sys.argv,
            "settings": report.settings(args),
            "machine": info,
            "notes": notes,
            "records": records,
        }
        report.write_json(document, args.json)
    return 0


def _log(record: dict) -> None:
    shape = "1 env" if record["part"] == "single" else f"{record['workers']} workers"
    print(
        f"{record['game']:26s} {shape:10s} ours {record['ours_us']:8.1f} us  gymnasium "
        f"{record['gymnasium_us']:8.1f} us  {record['ratio']:.2f}x",
        file=sys.stderr,
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m gpu_envs.benchmarks.felt_speed``."""
    return report.command_line(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
