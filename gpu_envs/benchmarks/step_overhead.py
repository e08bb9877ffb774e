"""The CPU step's own cost: CartPole's env beside its bare kernel; the parallel loop on a busy CPU.

    gpu-envs bench overhead --num-envs 256,4096,16384 --rounds 9 --round-seconds 0.2
    python -m gpu_envs.benchmarks.step_overhead --parts parallel --num-envs 4096,16384 --busy 2

Two parts, each in this one process with the protocol of :mod:`gpu_envs.benchmarks.timing`:
at each size the rows take their repeats in interleaved rounds (one repeat of each row per round,
``--rounds`` rounds of about ``--round-seconds`` each), a row's time per step is the median over the
rounds, and a ratio is the median of the per-round ratios, so a drift of a shared machine's speed
cancels out. Actions come from a pool of 64 pre-drawn batches, cycled (torch int64 tensors for the
envs, NumPy arrays for the bare kernel): sampling is not timed.

- ``overhead``: ``CartPoleVectorEnv`` with its defaults, the same env with
  ``validate_actions=False`` and ``copy_outputs=False``, and the bare kernel: the compiled step loop
  ``env.step`` calls, on the env's prepared arguments, with unchecked NumPy actions and the same
  output arrays every call (``gpu-envs bench cartpole --bare-kernel``'s row, with numba's thread
  count). The ratio is a row's speed over the bare kernel's (1.00x: no overhead).
- ``parallel``: at each size where the env steps with the parallel loop (from
  ``cpu_parallel_min_envs`` envs, with 2+ numba threads), ``env.step`` choosing its loop
  (:class:`gpu_envs.kernels.cpu.AdaptiveStep`), pinned to the parallel loop and pinned to the
  serial one, beside ``--busy`` child processes that spin on the CPU (``while True: pass``). The
  ratio is a row's speed over the serial loop's; the loop the adaptive env ended on is reported.
  The adaptive env starts on the loop last chosen for its size in the process (by the ``overhead``
  part's envs when it ran first), as any new env does.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial

from gpu_envs.benchmarks import machine, report, timing
from gpu_envs.benchmarks.cartpole import ACTION_POOL, bare_kernel_runner, gpu_envs_runner
from gpu_envs.benchmarks.timing import Runner

PARTS = ("overhead", "parallel")
#: The rows of each part: key -> label.
OVERHEAD_ROWS = {
    "default": "env.step, defaults",
    "unchecked_reused": "env.step, validate_actions=False, copy_outputs=False",
    "bare": "bare kernel",
}
PARALLEL_ROWS = {
    "adaptive": "env.step, adaptive loop",
    "parallel": "env.step, parallel loop",
    "serial": "env.step, serial loop",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``gpu-envs bench overhead``."""
    parser.add_argument(
        "--parts",
        type=partial(report.parse_name_list, allowed=PARTS),
        default=",".join(PARTS),
        help="comma-separated parts to run: overhead, parallel (default %(default)s)",
    )
    parser.add_argument(
        "--num-envs",
        type=report.parse_int_list,
        default="256,4096,16384",
        help="comma-separated batch sizes (default %(default)s; the parallel part skips the sizes "
        "that step serially)",
    )
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (%(default)s)")
    parser.add_argument(
        "--round-seconds",
        type=float,
        default=0.2,
        help="time of each row in a round, s (%(default)s)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        help="processes spinning on the CPU beside the parallel part (%(default)s)",
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default=None,
        help="CartPole's state dtype (default: the env's, float64 on the CPU)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of envs and action pools (0)")
    report.add_json_argument(parser, "every record")


def _timing_options(args: argparse.Namespace) -> dict:
    """Interleaved rounds of ``round_seconds`` each, every round kept (no waiting for quiet)."""
    if args.rounds < 1 or args.round_seconds <= 0:
        raise SystemExit(
            f"--rounds must be >= 1 and --round-seconds > 0, got {args.rounds} and "
            f"{args.round_seconds}"
        )
    return dict(
        repeats=args.rounds,
        target_seconds=args.round_seconds,
        warmup_seconds=min(0.5, args.round_seconds),
        wait_quiet_seconds=0.0,
        extra_attempts=0,
    )


def overhead_runners(num_envs: int, dtype: str | None, seed: int) -> dict[str, Runner]:
    """The rows of the ``overhead`` part at ``num_envs`` envs (see the module docstring)."""
    import numba

    builders: dict[str, Callable[[int, int], Runner]] = {
        "default": gpu_envs_runner("cpu", dtype),
        "unchecked_reused": gpu_envs_runner(
            "cpu", dtype, validate_actions=False, copy_outputs=False
        ),
        "bare": bare_kernel_runner(numba.get_num_threads(), dtype),
    }
    return {key: build(num_envs, seed) for key, build in builders.items()}


def steps_in_parallel(num_envs: int) -> bool:
    """Whether CartPole's env of ``num_envs`` envs steps with the parallel loop's chooser."""
    import numba

    import gpu_envs

    threads = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    return threads > 1 and num_envs >= gpu_envs.CartPoleVectorEnv.cpu_parallel_min_envs


def parallel_runners(num_envs: int, dtype: str | None, seed: int) -> dict[str, Runner]:
    """The rows of the ``parallel`` part at ``num_envs`` envs: CartPole's env three times, its step
    loop chosen as it runs, pinned parallel, pinned serial. Each runner's ``meta["chooser"]`` is
    its env's :class:`~gpu_envs.kernels.cpu.AdaptiveStep`."""
    import numpy as np
    import torch

    import gpu_envs
    from gpu_envs.kernels.cpu import AdaptiveStep

    pool = np.random.default_rng(seed).integers(0, 2, size=(ACTION_POOL, num_envs))
    runners = {}
    for key in PARALLEL_ROWS:
        env = gpu_envs.CartPoleVectorEnv(num_envs, dtype=dtype)
        env.reset(seed=seed)
        next_actions = timing.cycle_pool(torch.from_numpy(pool))
        env.step(next_actions())  # the first step makes the chooser
        chooser = env._cpu_step[1]
        if not isinstance(chooser, AdaptiveStep):
            raise RuntimeError(f"{num_envs} envs step without a loop chooser ({chooser!r})")
        if key != "adaptive":
            chooser.pin(parallel=key == "parallel")

        def step(env=env, next_actions=next_actions) -> object:
            return env.step(next_actions())

        runners[key] = Runner(
            step,
            num_envs,
            close=env.close,
            meta={"chooser": chooser},
        )
    return runners


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """``count`` child processes spinning on the CPU for the block (killed after it)."""
    children = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        if children:
            time.sleep(0.5)  # let them start spinning
        yield
    finally:
        for child in children:
            child.kill()
            child.wait()


def _records(
    part: str,
    rows: dict[str, str],
    num_envs: int,
    results: dict[str, timing.Measurement],
    reference: str,
) -> list[dict]:
    """One record per row: its median time per step and its speed ratio to ``reference``."""
    records = []
    for key, label in rows.items():
        result = results[key]
        records.append(
            {
                "part": part,
                "row": key,
                "label": label,
                "num_envs": num_envs,
                "us_per_step": statistics.median(1e6 * num_envs / r for r in result.repeat_rates),
                "env_steps_per_s": result.env_steps_per_s,
                "ratio_to": reference,
                "ratio": timing.median_ratio(result, results[reference]),
                "repeat_rates": result.repeat_rates,
                "max_background_load": result.max_background_load,
            }
        )
    return records


def measure_part(
    part: str,
    sizes: list[int],
    args: argparse.Namespace,
    notes: list[str],
    log: Callable[[str], None],
) -> list[dict]:
    """The records of ``part`` at each size (a note for each size it skips)."""
    options = _timing_options(args)
    records: list[dict] = []
    for num_envs in sizes:
        if part == "parallel" and not steps_in_parallel(num_envs):
            notes.append(
                f"parallel: {num_envs} envs skipped, they step with the serial loop only "
                "(below cpu_parallel_min_envs, or one numba thread)"
            )
            continue
        make = overhead_runners if part == "overhead" else parallel_runners
        rows = OVERHEAD_ROWS if part == "overhead" else PARALLEL_ROWS
        with contextlib.ExitStack() as stack:
            runners = make(num_envs, args.dtype, args.seed)
            for runner in runners.values():
                stack.enter_context(runner)
            if part == "parallel":
                stack.enter_context(busy_processes(args.busy))
            results = timing.measure_rounds(runners, **options)
        reference = "bare" if part == "overhead" else "serial"
        found = _records(part, rows, num_envs, results, reference)
        if part == "parallel":
            ended = runners["adaptive"].meta["chooser"].parallel_runs
            for record in found:
                record["busy"] = args.busy
                record["adaptive_ended_on"] = "parallel" if ended else "serial"
        records += found
        for record in found:
            log(
                f"{part} N={num_envs:<6d} {record['label']:55s} {record['us_per_step']:9.1f} us "
                f"{record['ratio']:.2f}x {reference}"
            )
    return records


def format_table(part: str, records: list[dict]) -> str:
    """A part's Markdown table: per size, each row's median µs per step, M env-steps/s and ratio."""
    rows = []
    for record in records:
        ended = record.get("adaptive_ended_on")
        rows.append(
            [
                str(record["num_envs"]),
                record["label"] + (f" (ended on {ended})" if record["row"] == "adaptive" else ""),
                f"{record['us_per_step']:.1f}",
                f"{record['env_steps_per_s'] / 1e6:.1f}",
                f"{record['ratio']:.2f}x",
            ]
        )
    reference = "bare kernel" if part == "overhead" else "serial loop"
    header = ["envs", "row", "µs / step", "M env-steps/s", f"speed / {reference}"]
    return f"{part}:\n" + report.markdown_table(header, rows)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench overhead``."""
    parts = args.parts
    out = sys.stderr if args.json == "-" else sys.stdout

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = datetime.datetime.now().astimezone()
    info = machine.machine_info()
    notes = [f"load average {os.getloadavg()[0]:.1f} at the start"]
    records = {part: measure_part(part, args.num_envs, args, notes, log) for part in parts}
    for part in parts:
        if records[part]:
            print(format_table(part, records[part]), file=out, flush=True)
    for note in notes:
        print(f"note: {note}", file=out, flush=True)
    if args.json is not None:
        document = {
            "benchmark": "overhead",
            "date": started.isoformat(timespec="seconds"),
            "command": sys.argv,
            "settings": report.settings(args),
            "machine": info,
            "notes": notes,
            "records": [record for part in parts for record in records[part]],
        }
        report.write_json(document, args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m gpu_envs.benchmarks.step_overhead``."""
    return report.command_line(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
