"""CartPole-v1 env-steps/s of gpu_envs (CPU, CUDA) beside gymnasium's vector envs.

Measured beside gymnasium's CartPoleVectorEnv and SyncVectorEnv. Every implementation is measured
in this one process with the protocol of :mod:`gpu_envs.benchmarks.timing` (first call apart,
warm-up, calibrated repeats, median). At each size the implementations take their repeats in
rounds (one repeat of each per round), and a ratio row is the median of the per-round ratios, so a
drift of a shared machine's speed cancels out. Actions are random and pre-generated (a pool of
batches cycled through): torch int64 on the env's device for ours, NumPy for gymnasium, so action
sampling is not timed. Ours returns fresh torch tensors every step, as a user gets them by
default; the "copy_outputs=False" row returns the env's own output buffers (valid until the next
step), as a rollout loop that copies what it keeps can ask for.
gymnasium's SyncVectorEnv is a Python loop over envs and is skipped above ``--sync-max-envs``.

The "bare kernel" rows (``--bare-kernel``) time our CPU driver alone (the step loop ``env.step``
calls, on prepared arguments, the actions taken from the same pool): no action checks, no tensors,
and the same output arrays every step, where the env writes each step's outputs into new arrays. One
row per numba thread count (1 and ``NUMBA_NUM_THREADS``); the ratio to the "faster bare kernel"
takes the faster of them in each round.

Also measured: the first step in a fresh Python process whose numba compile cache is warm (a
subprocess imports gpu_envs, builds the env, resets and times one step; it runs twice, the first
run fills the cache if it is cold).

The builders take a :class:`Game`, so other single-agent games reuse this module
(:mod:`gpu_envs.benchmarks.pendulum`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpu_envs.benchmarks import machine, report, timing
from gpu_envs.benchmarks.timing import Runner

DEFAULT_NUM_ENVS = "1,16,256,4096,16384,65536"
ACTION_POOL = 64
#: Env counts whose first step the fresh-process measurement times (serial and parallel CPU
#: kernels).
FIRST_STEP_NUM_ENVS = (16, 4096)
FIRST_STEP_TARGET_S = 2.0
NOISY_MARK = "†"


@dataclass(frozen=True)
class Game:
    """A single-agent game as the benchmark sees it.

    Attributes:
        name: the benchmark's name ("cartpole"), recorded in the JSON.
        env_class: our vector env's class name in :mod:`gpu_envs`.
        gym_id: gymnasium's id of the same game.
        random_actions: ``(rng, pool_size, num_envs) -> array``, a pool of random action batches as
            the env takes them (NumPy; ours gets them as torch tensors).
    """

    name: str
    env_class: str
    gym_id: str
    random_actions: Callable[[np.random.Generator, int, int], np.ndarray]


CARTPOLE = Game(
    "cartpole",
    "CartPoleVectorEnv",
    "CartPole-v1",
    lambda rng, pool, n: rng.integers(0, 2, size=(pool, n), dtype=np.int64),
)


@dataclass(frozen=True)
class Impl:
    """A row of the table: a name, how to build it at a size, and the largest size it runs at."""

    key: str
    label: str
    build: Callable[[int, int], Runner]
    max_envs: int | None = None
    skip_reason: str = ""


#: Ratio rows: the reference's name and its keys (several keys: the fastest of them in each round).
RATIO_REFERENCES: dict[str, tuple[str, ...]] = {
    "gymnasium CartPoleVectorEnv": ("gym_vector",),
    "gymnasium SyncVectorEnv": ("gym_sync",),
    "bare kernel, 1 thread": ("bare_cpu_1t",),
    "faster bare kernel": ("bare_cpu_1t", "bare_cpu_2t"),
}


def _make_env(
    game: Game, num_envs: int, device: str, dtype: str | None, validate_actions: bool = True
):
    import gpu_envs

    return getattr(gpu_envs, game.env_class)(
        num_envs, device=device, dtype=dtype, validate_actions=validate_actions
    )


def gpu_envs_runner(
    device: str,
    dtype: str | None,
    validate_actions: bool = True,
    pool_size: int = ACTION_POOL,
    game: Game = CARTPOLE,
    copy_outputs: bool = True,
) -> Callable[[int, int], Runner]:
    """A builder of :class:`Runner` for our vector env of ``game`` (actions: torch tensors on the
    device; ``copy_outputs``: the env's setting)."""

    def build(num_envs: int, seed: int) -> Runner:
        import torch

        env = _make_env(game, num_envs, device, dtype, validate_actions)
        env.copy_outputs = copy_outputs
        env.reset(seed=seed)
        pool = torch.as_tensor(
            game.random_actions(np.random.default_rng(seed), pool_size, num_envs), device=env.device
        )
        next_actions = timing.cycle_pool(pool)
        sync = torch.cuda.synchronize if env.device.type == "cuda" else None
        return Runner(
            lambda: env.step(next_actions()),
            num_envs,
            sync,
            env.close,
            meta={
                "dtype": str(env.dtype).replace("torch.", ""),
                "device": str(env.device),
                "validate_actions": validate_actions,
                "copy_outputs": copy_outputs,
            },
        )

    return build


def bare_kernel_runner(
    threads: int, dtype: str | None, game: Game = CARTPOLE
) -> Callable[[int, int], Runner]:
    """A builder of :class:`Runner` that calls our CPU driver directly with ``threads`` numba
    threads.

    The env is built and reset as usual; each call then runs the driver's step loop, compiled for
    the env's kernel arguments (``CPUDriver.compiled_step``, the loop ``env.step`` calls), on the
    env's prepared arguments with the actions (a NumPy array) taken from a pre-drawn pool and the
    loop's action check off. The numba thread count is set for the call and
    restored after it when it differs from the process default and the loop is the parallel one
    (the other rows run with the process default).
    """

    def build(num_envs: int, seed: int) -> Runner:
        import numba

        from gpu_envs.kernels.cpu import _NO_BOUNDS

        env = _make_env(game, num_envs, "cpu", dtype)
        env.reset(seed=seed)
        pool = game.random_actions(np.random.default_rng(seed), ACTION_POOL, num_envs)
        slot, driver, args = env._actions_index, env._driver, env.kernel_args
        before, like, after = args[:slot], args[slot], args[slot + 1 :]
        next_actions = timing.cycle_pool(list(pool))
        # no per-call typing, as env.step; unchecked actions (an array)
        compiled = driver.compiled_step(num_envs, before, like, after, pool[0], _NO_BOUNDS, False)

        def step() -> None:
            compiled(num_envs, before, like, after, next_actions(), _NO_BOUNDS, False)

        default = numba.get_num_threads()

        # The serial driver (small batches) runs on one thread whatever the setting.
        max_threads = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
        serial = num_envs < driver.parallel_min_envs or max_threads == 1

        def call() -> None:
            if threads == default or serial:
                step()
                return
            numba.set_num_threads(threads)
            step()
            numba.set_num_threads(default)

        return Runner(
            call,
            num_envs,
            close=env.close,
            meta={
                "dtype": str(env.dtype).replace("torch.", ""),
                "device": "cpu",
                "numba_threads": threads,
            },
        )

    return build


def _gymnasium(mode: str, game: Game = CARTPOLE) -> Callable[[int, int], Runner]:
    def build(num_envs: int, seed: int) -> Runner:
        import gymnasium as gym

        env = gym.make_vec(game.gym_id, num_envs=num_envs, vectorization_mode=mode)
        env.reset(seed=seed)
        next_actions = timing.cycle_pool(
            game.random_actions(np.random.default_rng(seed), ACTION_POOL, num_envs)
        )
        return Runner(
            lambda: env.step(next_actions()),
            num_envs,
            close=env.close,
            meta={"vector_class": type(env.unwrapped).__name__},
        )

    return build


def implementations(
    devices: list[str],
    dtype: str | None,
    sync_max_envs: int,
    game: Game = CARTPOLE,
    notes: list[str] | None = None,
    bare_kernel: bool = False,
) -> list[Impl]:
    """The rows to measure: ours on each device (default, validate_actions=False, and that with
    copy_outputs=False), with
    ``bare_kernel`` the bare CPU kernel (1 and NUMBA_NUM_THREADS threads), then gymnasium's own
    vector env (when the game has one, else a note) and its SyncVectorEnv."""
    import gymnasium as gym
    import numba

    rows = []
    for device in devices:
        rows.append(
            Impl(
                f"gpu_envs_{device}",
                f"gpu_envs {device}",
                gpu_envs_runner(device, dtype, True, game=game),
            )
        )
        rows.append(
            Impl(
                f"gpu_envs_{device}_novalidate",
                f"gpu_envs {device}, validate_actions=False",
                gpu_envs_runner(device, dtype, False, game=game),
            )
        )
        rows.append(
            Impl(
                f"gpu_envs_{device}_reuse",
                f"gpu_envs {device}, validate_actions=False, copy_outputs=False",
                gpu_envs_runner(device, dtype, False, game=game, copy_outputs=False),
            )
        )
    if bare_kernel and "cpu" in devices:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):  # type: ignore[attr-defined]
            rows.append(
                Impl(
                    f"bare_cpu_{threads}t",
                    f"bare CPU kernel, {threads} thread{'s' * (threads > 1)}",
                    bare_kernel_runner(threads, dtype, game),
                )
            )
    vector_class = gym.spec(game.gym_id).vector_entry_point
    if vector_class:
        rows.append(
            Impl(
                "gym_vector",
                f"gymnasium {str(vector_class).rsplit(':', 1)[-1]} (numpy)",
                _gymnasium("vector_entry_point", game),
            )
        )
    elif notes is not None:
        notes.append(
            f"gymnasium has no vector implementation of {game.gym_id} (no vector_entry_point): "
            "its SyncVectorEnv is the reference"
        )
    rows.append(
        Impl(
            "gym_sync",
            "gymnasium SyncVectorEnv",
            _gymnasium("sync", game),
            max_envs=sync_max_envs or None,
            skip_reason=f"Python loop over envs: skipped above {sync_max_envs} envs "
            "(--sync-max-envs)",
        )
    )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``gpu-envs bench cartpole`` (and of the games reusing this module)."""
    parser.add_argument(
        "--num-envs",
        default=DEFAULT_NUM_ENVS,
        help="comma-separated batch sizes (default %(default)s)",
    )
    parser.add_argument(
        "--devices",
        default="cpu,cuda",
        help="devices for gpu_envs, comma-separated; cuda is skipped with a note when "
        "no GPU is usable (default cpu,cuda)",
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default=None,
        help="state dtype of gpu_envs (default: float64 on cpu, float32 on cuda)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed repeats behind each median (3)"
    )
    parser.add_argument(
        "--target-seconds", type=float, default=1.0, help="length of one repeat (1.0)"
    )
    parser.add_argument("--warmup-seconds", type=float, default=0.5, help="minimum warm-up (0.5)")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=10.0,
        help="seconds to wait before a repeat for other processes to go quiet (10)",
    )
    parser.add_argument(
        "--extra-attempts",
        type=int,
        default=3,
        help="retries for repeats disturbed by other processes (3)",
    )
    parser.add_argument(
        "--sync-max-envs",
        type=int,
        default=4096,
        help="largest size for gymnasium's SyncVectorEnv, 0 = no limit (%(default)s)",
    )
    parser.add_argument(
        "--bare-kernel",
        action="store_true",
        help="also time our CPU driver alone on prepared arguments, with 1 and "
        "NUMBA_NUM_THREADS numba threads",
    )
    parser.add_argument(
        "--skip-first-step",
        action="store_true",
        help="do not measure the first step of a fresh process",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 2 repeats of 0.05 s, 0.05 s warm-up, no waiting for quiet",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of envs and action pools (0)")
    report.add_json_argument(parser, "every record")


def _timing_options(args) -> dict:
    if args.quick:
        return dict(
            repeats=2,
            target_seconds=0.05,
            warmup_seconds=0.05,
            wait_quiet_seconds=0.0,
            extra_attempts=0,
        )
    return dict(
        repeats=args.repeats,
        target_seconds=args.target_seconds,
        warmup_seconds=args.warmup_seconds,
        wait_quiet_seconds=args.wait_quiet,
        extra_attempts=args.extra_attempts,
    )


def _parse_sizes(text: str) -> list[int]:
    try:
        sizes = report.parse_int_list(text)
    except argparse.ArgumentTypeError as error:
        raise SystemExit(f"--num-envs: {error}") from None
    if not sizes:
        raise SystemExit(f"--num-envs needs at least one size, got {text!r}")
    return sizes


def _usable_devices(requested: str, notes: list[str]) -> list[str]:
    from gpu_envs.engine.devices import cuda_available

    devices = []
    for device in (d.strip() for d in requested.split(",") if d.strip()):
        if device.startswith("cuda") and not cuda_available():
            notes.append(f"{device}: skipped, no usable CUDA GPU on this machine")
            continue
        if device != "cpu" and not device.startswith("cuda"):
            raise SystemExit(f"--devices accepts cpu and cuda[:N], got {device!r}")
        devices.append(device)
    return devices


def measure_throughput(
    impls: list[Impl], sizes: list[int], seed: int, options: dict, log: Callable[[str], None]
) -> list[dict]:
    """One record per (implementation, size), sizes in the outer loop.

    At each size every implementation is built, then measured in the same rounds
    (:func:`timing.measure_rounds`), so their ``repeat_rates`` pair up round by round.
    """
    records = []
    for num_envs in sizes:
        active = [impl for impl in impls if impl.max_envs is None or num_envs <= impl.max_envs]
        with contextlib.ExitStack() as stack:
            runners = {impl.key: stack.enter_context(impl.build(num_envs, seed)) for impl in active}
            results = timing.measure_rounds(runners, **options)
        for impl in impls:
            record = {
                "kind": "throughput",
                "impl": impl.key,
                "label": impl.label,
                "num_envs": num_envs,
            }
            if impl not in active:
                records.append({**record, "kind": "skipped", "reason": impl.skip_reason})
                continue
            result = results[impl.key]
            records.append({**record, **runners[impl.key].meta, **result.to_dict()})
            log(
                f"{impl.label:45s} N={num_envs:<7d} "
                f"{report.format_rate(result.env_steps_per_s):>7s} "
                f"env-steps/s{' (noisy)' if result.noisy else ''}"
            )
    return records


_FIRST_STEP_SCRIPT = textwrap.dedent("""
    import json, sys, time
    start = time.perf_counter()
    import torch
    import gpu_envs
    imported = time.perf_counter() - start
    out = {"import_s": imported, "steps": []}
    env_class, env_kwargs = getattr(gpu_envs, sys.argv[3]), json.loads(sys.argv[4])
    for num_envs in json.loads(sys.argv[2]):
        start = time.perf_counter()
        env = env_class(num_envs, device=sys.argv[1], **env_kwargs)
        env.reset(seed=0)
        ready = time.perf_counter() - start
        # zeros are valid actions of every game; the env's _action_shape, as Tag has no batched
        # action_space
        dtype = torch.as_tensor(env.single_action_space.sample()).dtype
        actions = torch.zeros(env._action_shape, dtype=dtype, device=env.device)
        start = time.perf_counter()
        env.step(actions)
        if env.device.type == "cuda":
            torch.cuda.synchronize()
        out["steps"].append({"num_envs": num_envs, "make_and_reset_s": ready,
                             "first_step_s": time.perf_counter() - start})
    print(json.dumps(out))
""")


def measure_first_step(
    device: str,
    runs: int = 2,
    env_class: str = CARTPOLE.env_class,
    env_kwargs: dict | None = None,
    sizes: Sequence[int] = FIRST_STEP_NUM_ENVS,
    cache_dir: str | None = None,
) -> list[dict]:
    """First step of a fresh process, ``runs`` times in a row (the first may fill the compile
    cache).

    The process builds ``gpu_envs.<env_class>(num_envs, device=device, **env_kwargs)`` at each size,
    resets it and times one step with a sampled action batch. ``cache_dir``: numba's cache
    folder for the processes (an empty one makes the first run's cache cold).
    """
    environment = None if cache_dir is None else {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    records = []
    for run in range(1, runs + 1):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _FIRST_STEP_SCRIPT,
                device,
                json.dumps(list(sizes)),
                env_class,
                json.dumps(env_kwargs or {}),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=environment,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"first-step subprocess failed ({done.returncode}):\n{done.stderr[-2000:]}"
            )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        for step in result["steps"]:
            records.append(
                {
                    "kind": "first_step",
                    "env_class": env_class,
                    "device": device,
                    "run": run,
                    "import_s": result["import_s"],
                    **step,
                }
            )
    return records


def _cell(record: dict) -> str:
    if record["kind"] == "skipped":
        return "skipped"
    return report.format_rate(record["env_steps_per_s"]) + (NOISY_MARK if record["noisy"] else "")


def format_table(records: list[dict], sizes: list[int], notes: list[str]) -> str:
    """The throughput table (rows: implementations, columns: sizes) plus ratio rows and notes."""
    by_key: dict[str, dict[int, dict]] = {}
    labels: dict[str, str] = {}
    for record in records:
        if record["kind"] in ("throughput", "skipped"):
            by_key.setdefault(record["impl"], {})[record["num_envs"]] = record
            labels[record["impl"]] = record["label"]
    header = ["env-steps/s"] + [f"N={n}" for n in sizes] + ["first call (s)"]
    rows = []
    for key, cells in by_key.items():
        firsts = [r["first_call_s"] for r in cells.values() if r["kind"] == "throughput"]
        rows.append(
            [labels[key]]
            + [_cell(cells[n]) if n in cells else "" for n in sizes]
            + [f"{max(firsts):.2f}" if firsts else ""]
        )
    for name, reference_keys in RATIO_REFERENCES.items():
        for key, cells in by_key.items():
            # ours against every reference; the bare kernel against gymnasium (its own ratio, the
            # ceiling of ours)
            if not (
                key.startswith("gpu_envs")
                or (key.startswith("bare_cpu") and name.startswith("gymnasium"))
            ):
                continue
            ratios = []
            for n in sizes:
                ours = cells.get(n)
                theirs = [by_key.get(ref, {}).get(n) for ref in reference_keys]
                measured = [t for t in theirs if t and t["kind"] == "throughput"]
                ratio = (
                    timing.median_ratio(ours, timing.fastest_per_round(measured))
                    if ours and ours["kind"] == "throughput" and len(measured) == len(theirs)
                    else None
                )
                ratios.append("" if ratio is None else f"{ratio:.2f}x")
            if any(ratios):
                rows.append([f"ratio {labels[key]} / {name}"] + ratios + [""])
    lines = [report.markdown_table(header, rows)]
    if any(NOISY_MARK in cell for row in rows for cell in row):
        lines.append(
            f"\n{NOISY_MARK} other processes used >= {timing.NOISY_THRESHOLD:.0%} of the CPUs "
            "during a repeat behind this median (shared machine): treat it as a lower bound."
        )
    skipped = {r["reason"] for r in records if r["kind"] == "skipped"}
    lines += [f"\nskipped: {reason}" for reason in sorted(skipped)]
    lines += [f"\nnote: {note}" for note in notes]
    first_steps = [r for r in records if r["kind"] == "first_step"]
    if first_steps:
        lines.append("\n" + format_first_steps(first_steps))
    return "\n".join(lines)


def format_first_steps(records: list[dict]) -> str:
    """Table of the fresh-process first-step measurements."""
    header = [
        "fresh process",
        "env",
        "device",
        "N",
        "import gpu_envs (s)",
        "make + reset (s)",
        "first step (s)",
    ]
    rows = []
    for r in records:
        verdict = (
            ""
            if r["first_step_s"] < FIRST_STEP_TARGET_S
            else f" (over the {FIRST_STEP_TARGET_S:g} s target)"
        )
        rows.append(
            [
                f"run {r['run']}" + (" (may fill the cache)" if r["run"] == 1 else " (warm cache)"),
                r.get("env_class", CARTPOLE.env_class),
                r["device"],
                str(r["num_envs"]),
                f"{r['import_s']:.2f}",
                f"{r['make_and_reset_s']:.3f}",
                f"{r['first_step_s']:.3f}{verdict}",
            ]
        )
    return report.markdown_table(header, rows)


def run(args, game: Game = CARTPOLE) -> int:
    """Entry point of ``gpu-envs bench cartpole`` (and of the other games' benchmarks built on
    it)."""
    to_stdout = args.json == "-"
    out = sys.stderr if to_stdout else sys.stdout

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    sizes = _parse_sizes(args.num_envs)
    notes: list[str] = []
    devices = _usable_devices(args.devices, notes)
    impls = implementations(devices, args.dtype, args.sync_max_envs, game, notes, args.bare_kernel)
    started = datetime.datetime.now().astimezone()
    info = machine.machine_info()
    records = measure_throughput(impls, sizes, args.seed, _timing_options(args), log)
    if not args.skip_first_step:
        for device in devices:
            records += measure_first_step(device, env_class=game.env_class)
    table = format_table(records, sizes, notes)
    print(table, file=out, flush=True)
    if args.json is not None:
        document = {
            "benchmark": game.name,
            "date": started.isoformat(timespec="seconds"),
            "command": sys.argv,
            "settings": report.settings(args),
            "machine": info,
            "notes": notes,
            "records": records,
        }
        report.write_json(document, args.json)
    return 0
