"""Speed a user feels, in one run: the whole main job, one env, worker processes, vs the peers.

    gpu-envs bench felt --purejaxrl PUREJAXRL/purejaxrl --purejaxrl-python PY --cold
    gpu-envs bench felt --parts single,workers --steps 2000 --rounds 3 --workers 2,4

Three parts, interleaved: every round times each part's two sides once (which one goes first
alternating from round to round), part after part, so a drift of a shared machine's speed hits
every part and both sides alike. A row's time is the median over the rounds, its ratio the median
of the per-round ratios (ours / the peer's: below 1.00x ours is faster).

- ``main-job``: ``gpu-envs train cartpole`` as a whole process against PureJaxRL's whole CartPole
  script, warm caches and (``--cold``) empty ones (:mod:`gpu_envs.benchmarks.whole_command`).
  Skipped, saying so, without ``--purejaxrl-python``.
- ``single``: ``gym.make("gpu_envs/<id>")`` against ``gym.make("<id>")`` (both with gymnasium's
  wrappers), ``--steps`` random actions drawn before the clock from the action space (seeded),
  ``reset()`` whenever an episode ends: what a loop over one env (Tianshou's, SB3's) pays per step.
- ``workers``: ``gymnasium.vector.AsyncVectorEnv`` of N processes (each of ``--workers``) holding
  one ``gym.make`` env each, ``--worker-steps`` steps of random actions (the vector env autoresets):
  the time of one step of all workers (SB3's ``SubprocVecEnv``, RLlib's env runners, AgileRL's
  subprocess games have this shape).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial

from gpu_envs.benchmarks import machine, report, whole_command

#: gymnasium's classic games, each also registered as ``gpu_envs/<id>``.
CLASSIC_GAMES = (
    "CartPole-v1",
    "Pendulum-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
)
PARTS = ("main-job", "single", "workers")
SIDES = ("ours", "gymnasium")
#: The main job's measures (``whole_command.summarize``) as the table's first two columns.
_MAIN_JOB_ROWS = {
    "warm": ("main job, warm caches", "whole process"),
    "cold": ("main job, cold caches", "whole process"),
    "training": ("main job", "training clock to 475"),
}
#: Issue 43's targets, ours / the peer's.
TARGETS = {"single": 1.0, "workers": 1.0, **whole_command.TARGETS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``gpu-envs bench felt``."""
    parser.add_argument(
        "--parts",
        type=partial(report.parse_name_list, allowed=PARTS),
        default=",".join(PARTS),
        help="comma-separated parts to run (default %(default)s)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (%(default)s)")
    parser.add_argument("--purejaxrl", help="main-job: the purejaxrl/ folder of a clone")
    parser.add_argument(
        "--purejaxrl-python",
        help="main-job: an interpreter with jax, flax, optax, distrax (without it the part is "
        "skipped)",
    )
    parser.add_argument(
        "--cold", action="store_true", help="main-job: also first runs (empty compile caches)"
    )
    parser.add_argument(
        "--main-job-seed", type=int, default=1, help="main-job: the seed of every run (1)"
    )
    parser.add_argument(
        "--games",
        type=partial(report.parse_name_list, allowed=CLASSIC_GAMES),
        default=",".join(CLASSIC_GAMES),
        help="single: comma-separated gymnasium ids (default: every classic game)",
    )
    parser.add_argument(
        "--steps", type=int, default=20_000, help="single: steps of one env per round (%(default)s)"
    )
    parser.add_argument(
        "--workers",
        type=report.parse_int_list,
        default="2,4",
        help="workers: comma-separated process counts, one env each (%(default)s)",
    )
    parser.add_argument(
        "--worker-games",
        type=partial(report.parse_name_list, allowed=CLASSIC_GAMES),
        default="CartPole-v1",
        help="workers: comma-separated gymnasium ids (default %(default)s)",
    )
    parser.add_argument(
        "--worker-steps",
        type=int,
        default=2_000,
        help="workers: steps of the vector env per round (%(default)s)",
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


def summarize_rounds(per_round: dict[str, list[float]], steps: int) -> dict:
    """µs per step of each side from its per-round seconds: per side the median and the per-round
    figures, and the median of the per-round ratios ours / gymnasium's."""
    us = {side: [1e6 * seconds / steps for seconds in values] for side, values in per_round.items()}
    ratios = [o / g for o, g in zip(us["ours"], us["gymnasium"])]
    return {
        **{f"{side}_us": statistics.median(values) for side, values in us.items()},
        "ratio": statistics.median(ratios),
        "rounds_us": us,
    }


def play_round(plays: dict[str, Callable[[], float]], number: int) -> dict[str, float]:
    """Seconds of each side's play in round ``number`` (the first side first in even rounds)."""
    order = list(plays) if number % 2 == 0 else list(reversed(plays))
    return {side: plays[side]() for side in order}


def open_shapes(args: argparse.Namespace, stack: ExitStack) -> list[dict]:
    """The env shapes to time: per single game and per (worker game, N) a record's fields, its
    ``steps`` and its two ``plays``; worker processes are closed by ``stack``."""
    shapes = []
    for env_id in args.games if "single" in args.parts else ():
        plays = {
            side: single_loop(
                f"gpu_envs/{env_id}" if side == "ours" else env_id, args.steps, args.seed
            )
            for side in SIDES
        }
        shapes.append(dict(part="single", game=env_id, steps=args.steps, plays=plays))
    for env_id in args.worker_games if "workers" in args.parts else ():
        for workers in args.workers:
            plays = {}
            for side in SIDES:
                name = f"gpu_envs/{env_id}" if side == "ours" else env_id
                plays[side], close = workers_loop(name, workers, args.worker_steps, args.seed)
                stack.callback(close)
            shapes.append(
                dict(
                    part="workers",
                    game=env_id,
                    workers=workers,
                    steps=args.worker_steps,
                    plays=plays,
                )
            )
    return shapes


def format_table(records: list[dict], main_job: dict) -> str:
    """One Markdown table: the main job's medians, then every env shape's, each with its ratio and
    issue 43's target."""
    rows = [
        [
            *_MAIN_JOB_ROWS[name],
            f"{s['gpu_envs_s']:.2f} s",
            f"PureJaxRL {s['purejaxrl_s']:.2f} s",
            f"{s['ratio']:.2f}x",
            _judged(s["ratio"], s["target"]),
        ]
        for name, s in main_job.items()
    ]
    rows += [
        [
            record["game"],
            "1 env" if record["part"] == "single" else f"{record['workers']} workers x 1 env",
            f"{record['ours_us']:.1f} µs",
            f"gymnasium {record['gymnasium_us']:.1f} µs",
            f"{record['ratio']:.2f}x",
            _judged(record["ratio"], TARGETS[record["part"]]),
        ]
        for record in records
    ]
    header = ["what", "shape", "ours", "peer", "ours / peer", "target (issue 43)"]
    return report.markdown_table(header, rows)


def _judged(ratio: float, target: float) -> str:
    return f"<= {target}x: {'met' if ratio <= target else 'not met'}"


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench felt``."""
    for name in ("steps", "rounds", "worker_steps"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    out = sys.stderr if args.json == "-" else sys.stdout
    started = datetime.datetime.now().astimezone()
    info = machine.machine_info()
    notes = [f"load average {machine.load_average():.1f} at the start", f"CPU {info['cpu_model']}"]
    caches = ("warm", "cold") if args.cold else ("warm",)
    runs: list[dict] = []
    with ExitStack() as stack:
        main_job = _main_job(args, stack, notes, out)
        shapes = open_shapes(args, stack)
        seconds: list[dict[str, list[float]]] = [{side: [] for side in SIDES} for _ in shapes]
        for number in range(args.rounds):
            if main_job is not None:
                for result in whole_command.play_round(number + 1, caches, *main_job):
                    runs.append(result)
                    _log(
                        f"round {number + 1} main job {result['cache']:4s} {result['impl']:9s} "
                        f"{result['wall_s']:.1f} s"
                    )
            for shape, per_side in zip(shapes, seconds):
                for side, value in play_round(shape["plays"], number).items():
                    per_side[side].append(value)
            _log(f"round {number + 1} of {args.rounds}: env shapes timed")
    records = [
        {
            **{key: value for key, value in shape.items() if key not in ("plays", "steps")},
            **summarize_rounds(per_side, shape["steps"]),
        }
        for shape, per_side in zip(shapes, seconds)
    ]
    summary = whole_command.summarize(runs)
    notes.append(f"load average {machine.load_average():.1f} at the end")
    if runs:
        print(whole_command.markdown(runs, summary) + "\n", file=out, flush=True)
    print(format_table(records, summary), file=out, flush=True)
    for note in notes:
        print(f"note: {note}", file=out, flush=True)
    if args.json is not None:
        document = {
            "benchmark": "felt",
            "date": started.isoformat(timespec="seconds"),
            "command": sys.argv,
            "settings": report.settings(args),
            "machine": info,
            "notes": notes,
            "main_job": {"runs": runs, "summary": summary},
            "records": records,
        }
        report.write_json(document, args.json)
    return 0


def _main_job(args: argparse.Namespace, stack: ExitStack, notes: list[str], out) -> tuple | None:
    """The main-job part's arguments of :func:`whole_command.play_round` after its warm-up runs
    (its JAX cache folder closed by ``stack``), or None when it is skipped (noted)."""
    if "main-job" not in args.parts:
        return None
    if args.purejaxrl_python is None:
        notes.append("main job vs PureJaxRL skipped: no --purejaxrl-python given")
        print(f"note: {notes[-1]}", file=out, flush=True)
        return None
    if args.purejaxrl is None:
        raise SystemExit("--purejaxrl-python needs --purejaxrl (the purejaxrl/ folder)")
    whole_command.check_purejaxrl(args.purejaxrl, args.purejaxrl_python)
    jax_cache = stack.enter_context(tempfile.TemporaryDirectory(prefix="felt_jax_"))
    main_job = (args.purejaxrl, args.purejaxrl_python, args.main_job_seed, jax_cache)
    print("main job: filling the warm caches (one unmeasured run each) ...", file=out, flush=True)
    whole_command.fill_warm_caches(*main_job)
    return main_job


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m gpu_envs.benchmarks.felt_speed``."""
    return report.command_line(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
