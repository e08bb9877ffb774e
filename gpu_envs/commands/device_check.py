"""``gpu-envs device-check``: CPU-vs-CUDA parity and CUDA throughput on one GPU, in a few minutes.

Parity: :func:`gpu_envs.benchmarks.parity.compare_devices` feeds the same seeds and the same random
actions to an env on the CPU and one on the GPU, step by step, with autoresets, and compares every
output and state array: floats within a per-dtype tolerance (the GPU compiler fuses multiply-adds,
so the last bits may differ), integer state exactly, except where a near-tie explains the
difference (a CartPole at a termination threshold, a runner at Tag's tagging margin, two of Tag's
neighbours at the same distance). A check passes when every difference is within tolerance or such
a near-tie, and fails on any other.

Throughput: env-steps/s of the CUDA env over a range of batch sizes, synchronised with
``torch.cuda.synchronize`` (protocol of :mod:`gpu_envs.benchmarks.timing`).

This command picks the games and their settings (:func:`plan`) and reports; ``--quick`` runs small
parity checks only.

``--full`` is the prepared GPU script (at most ~8 minutes on one H200; :func:`full_plan`): parity of
every game, then for CartPole and Pendulum at 4096 / 65,536 / 2^20 envs and Tag's seed config at
1000 / 10,000 games the env-steps/s of the lean step (``validate_actions=False``,
``copy_outputs=False``) with plain launches and with CUDA-graph replay (interleaved rounds), and
the host microseconds per step of each; the bundled PPO's end-to-end env-steps/s for CartPole and
the seed Tag config with ``trainer.cuda_graphs`` on and off; the first step of a fresh process with
a cold and a warm kernel cache. ``--full --small`` runs the same script at sizes the CPU
(``--device cpu``) and the CUDA simulator finish in seconds: the CI's proof that it runs end to
end (graph rows are only measured on a real GPU).

Exit status: 0 all parity checks pass, 1 a parity check failed, 2 no usable CUDA GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial

from gpu_envs.benchmarks import report

NO_GPU_EXIT = 2
FAIL_EXIT = 1


@dataclasses.dataclass
class Row:
    """One line of the report; ``status`` is PASS or FAIL for checks, empty for measurements."""

    check: str
    setting: str
    result: str
    status: str = ""
    record: dict = dataclasses.field(default_factory=dict)


def _parity_row(
    check: str,
    setting: str,
    record: dict,
    make_env: Callable[[str], object],
    steps: int,
    device: str,
    reference_device: str,
    seed: int,
) -> Row:
    """Compare ``make_env`` on the two devices and report it as a row."""
    from gpu_envs.benchmarks.parity import compare_devices

    parity = compare_devices(
        make_env, steps, device=device, reference_device=reference_device, seed=seed
    )
    return Row(
        check,
        f"{setting}, {reference_device} vs {device}",
        parity.summary(),
        parity.verdict,
        {"kind": "parity", **record, **parity.to_record()},
    )


def _throughput_row(check: str, setting: str, runner, timing_options: dict, record: dict) -> Row:
    """Time ``runner`` (then close it) and report it as a row."""
    from gpu_envs.benchmarks import timing

    rate = report.format_rate
    with runner:
        result = timing.measure(runner, **timing_options)
    text = f"{rate(result.env_steps_per_s)} env-steps/s"
    if runner.agents_per_env > 1:
        text += f" ({rate(result.env_steps_per_s * runner.agents_per_env)} agent-steps/s)"
    text += f"; first call {result.first_call_s:.2f} s"
    return Row(check, setting, text, "", {"kind": "throughput", **record, **result.to_dict()})


# --------------------------------------------------------------------------------------- CartPole
def cartpole_parity(
    device: str,
    *,
    reference_device: str = "cpu",
    dtype: str = "float32",
    autoreset_mode: str = "next_step",
    num_envs: int = 4096,
    steps: int = 2000,
    max_episode_steps: int = 50,
    seed: int = 0,
) -> Row:
    """CartPole on ``device`` against ``reference_device``: same seeds, same random actions."""
    from gpu_envs.games.cartpole import CartPoleVectorEnv

    make_env = partial(
        CartPoleVectorEnv,
        num_envs,
        dtype=dtype,
        autoreset_mode=autoreset_mode,
        max_episode_steps=max_episode_steps,
    )
    setting = (
        f"{dtype}, {autoreset_mode}, {num_envs} envs x {steps} steps, "
        f"max_episode_steps={max_episode_steps}"
    )
    record = {"game": "cartpole", "dtype": dtype, "autoreset_mode": autoreset_mode}
    return _parity_row(
        "cartpole parity", setting, record, make_env, steps, device, reference_device, seed
    )


def cartpole_throughput(
    device: str, log2_sizes: range, timing_options: dict, dtype: str = "float32"
) -> list[Row]:
    """env-steps/s of ``CartPoleVectorEnv`` on ``device``, with and without action validation."""
    from gpu_envs.benchmarks.cartpole import gpu_envs_runner

    rows = []
    for log2 in log2_sizes:
        num_envs = 2**log2
        pool = max(2, min(64, 2**24 // num_envs))
        for validate in (True, False):
            rows.append(
                _throughput_row(
                    "cartpole throughput",
                    f"2^{log2} envs, {dtype}, validate_actions={validate}",
                    gpu_envs_runner(device, dtype, validate, pool)(num_envs, 0),
                    timing_options,
                    {
                        "game": "cartpole",
                        "num_envs": num_envs,
                        "dtype": dtype,
                        "validate_actions": validate,
                    },
                )
            )
    return rows


# --------------------------------------------------------------------------------------- Pendulum
def pendulum_parity(
    device: str,
    *,
    reference_device: str = "cpu",
    dtype: str = "float32",
    num_envs: int = 1024,
    steps: int = 400,
    seed: int = 0,
) -> Row:
    """Pendulum on ``device`` against ``reference_device``: same seeds, same random torques."""
    from gpu_envs.games.pendulum import PendulumVectorEnv

    make_env = partial(PendulumVectorEnv, num_envs, dtype=dtype, max_episode_steps=50)
    setting = f"{dtype}, {num_envs} envs x {steps} steps"
    record = {"game": "pendulum", "dtype": dtype}
    return _parity_row(
        "pendulum parity", setting, record, make_env, steps, device, reference_device, seed
    )


# --------------------------------------------------------------------------------------- registry
#: Games with a parity check of their own; the registry's others get :func:`game_parity`.
DEDICATED_PARITY = ("cartpole", "pendulum", "tag")


def game_parity(
    name: str,
    device: str,
    *,
    reference_device: str = "cpu",
    dtype: str = "float32",
    num_envs: int = 1024,
    steps: int = 400,
    max_episode_steps: int = 50,
    seed: int = 0,
) -> Row:
    """A single-agent game of :data:`gpu_envs.games.GAMES` (its vector env) on ``device`` against
    ``reference_device``: same seeds, same random actions."""
    from gpu_envs import games

    env_class = games.load(games.GAMES[name].vector_env)
    make_env = partial(env_class, num_envs, dtype=dtype, max_episode_steps=max_episode_steps)
    setting = f"{dtype}, {num_envs} envs x {steps} steps, max_episode_steps={max_episode_steps}"
    record = {"game": name, "dtype": dtype}
    return _parity_row(
        f"{name} parity", setting, record, make_env, steps, device, reference_device, seed
    )


# --------------------------------------------------------------------------------------- Tag
def tag_parity(
    device: str,
    *,
    reference_device: str = "cpu",
    num_envs: int = 64,
    steps: int = 400,
    seed: int = 0,
    params: dict | None = None,
) -> Row:
    """Tag (the seed config, or ``params``) on ``device`` against ``reference_device``: same seeds
    and actions."""
    from gpu_envs.games.tag.env import TagEnv
    from gpu_envs.games.tag.params import seed_config

    make_env = partial(TagEnv, num_envs, **(seed_config() if params is None else params))
    setting = (
        f"{'seed config' if params is None else 'small config'}, {num_envs} envs x {steps} steps"
    )
    return _parity_row(
        "tag parity", setting, {"game": "tag"}, make_env, steps, device, reference_device, seed
    )


def tag_throughput(device: str, log2_sizes: range, timing_options: dict) -> list[Row]:
    """env-steps/s (and agent-steps/s) of ``TagEnv`` with the seed config on ``device``."""
    from gpu_envs.benchmarks.tag import make_ours
    from gpu_envs.games.tag.params import seed_config

    rows = []
    for log2 in log2_sizes:
        num_envs = 2**log2
        runner = make_ours(num_envs, 0, device=device, **seed_config())
        rows.append(
            _throughput_row(
                "tag throughput",
                f"2^{log2} envs, seed config ({runner.agents_per_env} agents)",
                runner,
                timing_options,
                {"game": "tag", "num_envs": num_envs, "agents_per_env": runner.agents_per_env},
            )
        )
    return rows


def tag_scale_throughput(device: str, num_envs: int, timing_options: dict) -> list[Row]:
    """env-steps/s of Tag at the original paper's scale point: ``num_envs`` games of 1000 agents
    (10 taggers and 990 runners; the seed config otherwise)."""
    from gpu_envs.benchmarks.tag import SCALE_TEAMS, make_ours
    from gpu_envs.games.tag.params import seed_config

    taggers, runners = SCALE_TEAMS
    params = {**seed_config(), "num_taggers": taggers, "num_runners": runners}
    runner = make_ours(num_envs, 0, device=device, **params)
    setting = f"{num_envs} envs x {taggers + runners} agents ({taggers} taggers)"
    record = {"game": "tag", "num_envs": num_envs, "agents_per_env": taggers + runners}
    return [_throughput_row("tag scale throughput", setting, runner, timing_options, record)]


# --------------------------------------------------------------------------------------- trainer
def trainer_throughput(
    device: str,
    iterations: int,
    overrides: Sequence[str] = (),
    game: str = "tag",
    cuda_graphs: bool | None = None,
) -> list[Row]:
    """End-to-end env-steps/s of ``gpu-envs train <game>`` (the bundled preset; Tag's is the seed
    run config) with Fabric on ``device``'s kind: ``iterations`` of rollout, advantages and
    update, evaluations excluded.

    ``overrides`` (dotted ``key=value``) change the config, e.g. to shrink it for a test;
    ``cuda_graphs`` (None: the config's) turns the graph rollouts on or off. The run's console
    output goes to stderr; its experiment folder to a temporary folder.
    """
    import contextlib

    import torch

    from gpu_envs.runs.config import RunConfig, apply_overrides
    from gpu_envs.runs.presets import preset
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric

    # (the simulated device's trainer runs on the CPU: Fabric needs a real GPU for "cuda")
    accelerator = "cuda" if device != "cpu" and torch.cuda.is_available() else "cpu"
    with tempfile.TemporaryDirectory() as folder:
        data = apply_overrides(preset(game), list(overrides))
        batch = data["trainer"]["train_batch_size"]
        data = apply_overrides(
            data,
            [
                f"trainer.accelerator={accelerator}",
                "trainer.devices=1",
                f"trainer.total_timesteps={iterations * batch}",
                "trainer.progress_bar=false",
                f"saving.basedir={folder}",
                *([] if cuda_graphs is None else [f"trainer.cuda_graphs={cuda_graphs}"]),
            ],
        )
        config = RunConfig.from_dict(data)
        with contextlib.redirect_stdout(sys.stderr):
            trainer = Trainer(make_fabric(config), config)
            result = trainer.fit()
    graphs = trainer.collector.graph is not None and trainer.collector.graph.graph is not None
    rate = result["env_steps"] / result["train_seconds"]
    setting = (
        f"{'seed run config' if game == 'tag' else game + ' preset'}, {result['iterations']} "
        f"iterations, Fabric on {accelerator}, cuda_graphs={graphs}"
    )
    text = f"{report.format_rate(rate)} env-steps/s ({result['env_steps']} env steps)"
    record = {
        "kind": "throughput",
        "game": game,
        "cuda_graphs": graphs,
        "env_steps_per_s": rate,
        **result,
    }
    return [Row("trainer throughput", setting, text, "", record)]


# --------------------------------------------------------------------------------------- --full
#: game -> env counts of the --full throughput rows, and of --full --small.
FULL_SIZES = {
    "cartpole": (4096, 65536, 2**20),
    "pendulum": (4096, 65536, 2**20),
    "tag": (1000, 10000),
}
SMALL_SIZES = {"cartpole": (8,), "pendulum": (8,), "tag": (2,)}
#: Tag's small config (--quick, --small): 8 agents, a few steps per episode.
SMALL_TAG = dict(
    num_taggers=2,
    num_runners=6,
    episode_length=8,
    grid_length=3.0,
    tagging_distance=0.15,
    use_full_observation=False,
    num_other_agents_observed=3,
)
#: Steps timed without a synchronisation to measure the host's time per step (--full, --small).
HOST_STEPS = 200
SMALL_HOST_STEPS = 3


def lean_env(game: str, num_envs: int, device: str, small: bool):
    """``game``'s env on the lean path (``validate_actions=False``, ``copy_outputs=False``), reset,
    and a zero action batch on its device (zeros are valid actions of every game)."""
    import torch

    from gpu_envs.games.cartpole import CartPoleVectorEnv
    from gpu_envs.games.pendulum import PendulumVectorEnv
    from gpu_envs.games.tag.env import TagEnv
    from gpu_envs.games.tag.params import seed_config

    if game == "tag":
        env = TagEnv(
            num_envs, device, validate_actions=False, **(SMALL_TAG if small else seed_config())
        )
    else:
        env_class = CartPoleVectorEnv if game == "cartpole" else PendulumVectorEnv
        env = env_class(num_envs, device, validate_actions=False)
    env.copy_outputs = False
    env.reset(seed=0)
    shape, dtype = env.action_layout()
    return env, torch.zeros(shape, dtype=dtype, device=env.device)


def host_us_per_step(
    call: Callable[[], object], sync: Callable[[], object] | None, steps: int = HOST_STEPS
) -> float:
    """Microseconds of host time per ``call()``, over ``steps`` calls not waited for."""
    if sync is not None:
        sync()
    start = time.perf_counter()
    for _ in range(steps):
        call()
    host = time.perf_counter() - start
    if sync is not None:
        sync()
    return 1e6 * host / steps


def lean_throughput(game: str, num_envs: int, device: str, small: bool, options: dict) -> list[Row]:
    """env-steps/s and host us per step of ``game``'s lean step, plain launches and (on a GPU)
    CUDA-graph replay of ``env.step``, timed in interleaved rounds on one env."""
    import torch

    from gpu_envs.benchmarks import timing
    from gpu_envs.engine import cuda_graphs

    env, actions = lean_env(game, num_envs, device, small)
    sync = torch.cuda.synchronize if env.device.type == "cuda" else None
    runners = {"plain launches": timing.Runner(lambda: env.step(actions), num_envs, sync)}
    why_not = cuda_graphs.capturable(env)
    if why_not is None:
        graph = cuda_graphs.CapturedStep(lambda: env.step(actions), env.device)
        runners["graph replay"] = timing.Runner(graph.replay, num_envs, sync)
    results = timing.measure_rounds(runners, **options)
    rows = []
    for name, result in results.items():
        host_us = host_us_per_step(
            runners[name].call, sync, SMALL_HOST_STEPS if small else HOST_STEPS
        )
        rows.append(
            Row(
                f"{game} lean step",
                f"{num_envs} envs, {name}",
                f"{report.format_rate(result.env_steps_per_s)} env-steps/s; host {host_us:.1f} "
                "us per step",
                "",
                {
                    "kind": "throughput",
                    "game": game,
                    "num_envs": num_envs,
                    "launch": name,
                    "host_us_per_step": host_us,
                    **result.to_dict(),
                },
            )
        )
    if why_not is not None:
        rows.append(
            Row(f"{game} lean step", f"{num_envs} envs, graph replay", f"not run: {why_not}")
        )
    env.close()
    return rows


def first_step_rows(
    game: str, device: str, num_envs: int, env_kwargs: dict, cold: bool = True
) -> list[Row]:
    """The first step of a fresh process on ``device``, with an empty kernel cache (cold), then
    with the cache the first process filled (warm). ``cold=False`` (CI) keeps numba's own cache
    folder: the first run finds what earlier runs left there."""
    from gpu_envs.benchmarks.cartpole import measure_first_step

    env_class = {"cartpole": "CartPoleVectorEnv", "tag": "TagEnv"}[game]
    with tempfile.TemporaryDirectory() as cache:
        records = measure_first_step(
            device, 2, env_class, env_kwargs, sizes=(num_envs,), cache_dir=cache if cold else None
        )
    return [
        Row(
            "first step",
            f"{game}, {num_envs} envs, fresh process, {cache} kernel cache",
            f"{r['first_step_s']:.3f} s (make and reset {r['make_and_reset_s']:.2f} s, import "
            f"{r['import_s']:.2f} s)",
            "",
            {**r, "game": game, "cache": cache},
        )
        for r, cache in zip(records, ("cold" if cold else "existing", "warm"))
    ]


def _trainer_overrides(game: str, small: bool) -> list[str]:
    """Overrides of the --full trainer rows: no evaluation; with ``small`` a tiny run."""
    overrides = ["evaluation.eval_freq=0"]
    if small:
        overrides += ["trainer.num_envs=2", "trainer.train_batch_size=8", "trainer.compile=false"]
        if game == "tag":
            overrides += [f"env.{key}={value}" for key, value in SMALL_TAG.items()]
    return overrides


def full_plan(args) -> list[Callable[[], list[Row]]]:
    """``--full``: every game's parity (the --quick sizes with ``--small``), the lean step's
    throughput with plain launches and graph replay, the trainer with graphs on and off, and the
    first step of a fresh process."""
    small = args.small
    if small:
        _quick(args)
        args.trainer_iterations = 1
    options = (
        dict(repeats=1, target_seconds=0.01, warmup_seconds=0.0, calls_per_repeat=2)
        if small
        else dict(
            repeats=args.repeats,
            target_seconds=args.target_seconds,
            warmup_seconds=args.warmup_seconds,
        )
    )
    args.skip_throughput = True
    steps = plan(args)  # the parity checks
    sizes = SMALL_SIZES if small else FULL_SIZES
    for game, counts in sizes.items():
        for num_envs in counts:
            steps.append(partial(lean_throughput, game, num_envs, args.device, small, options))
    import torch

    for game in ("cartpole", "tag"):
        # (the trainer ignores cuda_graphs on the CPU, where the simulator's trainer runs too)
        for graphs in (False, True) if torch.cuda.is_available() else (False,):
            steps.append(
                partial(
                    trainer_throughput,
                    args.device,
                    args.trainer_iterations,
                    _trainer_overrides(game, small),
                    game,
                    graphs,
                )
            )
    from gpu_envs.games.tag.params import seed_config

    first_steps = {"cartpole": {}, "tag": SMALL_TAG if small else seed_config()}
    for game, kwargs in first_steps.items():
        steps.append(partial(first_step_rows, game, args.device, sizes[game][0], kwargs, not small))
    return steps


# --------------------------------------------------------------------------------------- command
def _log2_range(text: str) -> range:
    try:
        low, high = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected LOW:HIGH (powers of two), got {text!r}"
        ) from None
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected 0 <= LOW <= HIGH, got {text!r}")
    return range(low, high + 1)


def add_parser(subparsers) -> None:
    """Add ``gpu-envs device-check``."""
    parser = subparsers.add_parser(
        "device-check",
        help="CPU-vs-CUDA parity and CUDA throughput (needs a GPU)",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", default="cuda", help="CUDA device to check (cuda)")
    parser.add_argument("--parity-envs", type=int, default=4096, help="CartPole parity envs (4096)")
    parser.add_argument(
        "--parity-steps", type=int, default=2000, help="CartPole parity steps (2000)"
    )
    parser.add_argument(
        "--max-episode-steps",
        type=int,
        default=50,
        help="CartPole truncation in the parity run, short to exercise it (50)",
    )
    parser.add_argument("--tag-parity-envs", type=int, default=64, help="Tag parity games (64)")
    parser.add_argument("--tag-parity-steps", type=int, default=400, help="Tag parity steps (400)")
    for game, low, high in (("cartpole", 10, 22), ("tag", 6, 12)):
        parser.add_argument(
            f"--{game}-log2",
            type=_log2_range,
            default=range(low, high + 1),
            metavar="LOW:HIGH",
            help=f"{game} throughput sizes 2^LOW..2^HIGH ({low}:{high})",
        )
    parser.add_argument(
        "--tag-scale-envs",
        type=int,
        default=2000,
        help="games of the 1000-agent Tag scale point (2000; 0 skips it)",
    )
    parser.add_argument(
        "--trainer-iterations",
        type=int,
        default=10,
        help="iterations of the seed run config's training timed end to end (10; 0 skips it)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per size (3)")
    parser.add_argument(
        "--target-seconds", type=float, default=0.3, help="length of one repeat (0.3)"
    )
    parser.add_argument("--warmup-seconds", type=float, default=0.3, help="minimum warm-up (0.3)")
    parser.add_argument("--skip-throughput", action="store_true", help="parity checks only")
    parser.add_argument(
        "--full",
        action="store_true",
        help="the prepared GPU script: parity of every game, the lean step with plain launches "
        "and graph replay at large sizes, the trainer with graphs on and off, the first step "
        "(about 8 minutes on one H200)",
    )
    parser.add_argument(
        "--small",
        action="store_true",
        help="with --full: CI sizes (seconds on the CPU, --device cpu, or the CUDA simulator)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small parity runs of every game, no throughput: seconds on a GPU, minutes "
        "in the CUDA simulator (NUMBA_ENABLE_CUDASIM=1, the CI's simulated device)",
    )
    report.add_json_argument(parser, "the rows")
    parser.set_defaults(func=run)


def _quick(args) -> None:
    """``--quick``: sizes the CUDA simulator runs in minutes, and no throughput."""
    args.parity_envs, args.parity_steps, args.max_episode_steps = 16, 60, 12
    args.tag_parity_envs, args.tag_parity_steps, args.skip_throughput = 2, 12, True
    args.tag_params = SMALL_TAG


def plan(args) -> list[Callable[[], list[Row]]]:
    """The checks to run, in order: CartPole parity and throughput, Pendulum parity, the parity of
    the registry's other games (:data:`gpu_envs.games.GAMES`), Tag's parity, throughput and scale
    point, then the trainer's end-to-end throughput."""
    if args.quick:
        _quick(args)
    timing_options = dict(
        repeats=args.repeats, target_seconds=args.target_seconds, warmup_seconds=args.warmup_seconds
    )
    steps: list[Callable[[], list[Row]]] = []
    for dtype in ("float64", "float32"):
        for mode in ("next_step", "same_step"):
            steps.append(
                lambda dtype=dtype, mode=mode: [
                    cartpole_parity(
                        args.device,
                        dtype=dtype,
                        autoreset_mode=mode,
                        num_envs=args.parity_envs,
                        steps=args.parity_steps,
                        max_episode_steps=args.max_episode_steps,
                    )
                ]
            )
    if not args.skip_throughput:
        steps.append(lambda: cartpole_throughput(args.device, args.cartpole_log2, timing_options))
    for dtype in ("float64", "float32"):
        steps.append(
            lambda dtype=dtype: [
                pendulum_parity(
                    args.device, dtype=dtype, num_envs=args.parity_envs, steps=args.parity_steps
                )
            ]
        )
    from gpu_envs import games

    for name in games.GAMES:
        if name in DEDICATED_PARITY:
            continue
        for dtype in ("float64", "float32"):
            steps.append(
                lambda name=name, dtype=dtype: [
                    game_parity(
                        name,
                        args.device,
                        dtype=dtype,
                        num_envs=args.parity_envs,
                        steps=args.parity_steps,
                        max_episode_steps=args.max_episode_steps,
                    )
                ]
            )
    steps.append(
        lambda: [
            tag_parity(
                args.device,
                num_envs=args.tag_parity_envs,
                steps=args.tag_parity_steps,
                params=getattr(args, "tag_params", None),
            )
        ]
    )
    if not args.skip_throughput:
        steps.append(lambda: tag_throughput(args.device, args.tag_log2, timing_options))
        if args.tag_scale_envs > 0:
            steps.append(
                lambda: tag_scale_throughput(args.device, args.tag_scale_envs, timing_options)
            )
        if args.trainer_iterations > 0:
            steps.append(lambda: trainer_throughput(args.device, args.trainer_iterations))
    return steps


def format_table(rows: list[Row]) -> str:
    """All rows as one Markdown table."""
    return report.markdown_table(
        ["check", "setting", "result", "status"],
        [[r.check, r.setting, r.result, r.status] for r in rows],
    )


def exit_status(rows: list[Row]) -> int:
    """1 when a check failed, else 0."""
    return FAIL_EXIT if any(r.status == "FAIL" for r in rows) else 0


def run(args) -> int:
    """Entry point of ``gpu-envs device-check``."""
    from gpu_envs.engine.devices import cuda_available, simulated_cuda

    simulated = simulated_cuda()
    on_cpu = args.device == "cpu"
    if not (on_cpu or cuda_available() or simulated):
        print(
            "gpu-envs device-check: no usable CUDA GPU here (it needs torch.cuda.is_available() "
            "and numba-cuda to find a driver); run it on a machine with an NVIDIA GPU. The CPU "
            "paths are covered by the test suite and `gpu-envs bench`.",
            file=sys.stderr,
        )
        return NO_GPU_EXIT
    import torch

    out = sys.stderr if args.json == "-" else sys.stdout
    if on_cpu:
        name = "the CPU (reference: the CPU)"
    elif simulated:
        name = "numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)"
    else:
        name = torch.cuda.get_device_name(args.device)
    print(f"device-check on {name}", file=out, flush=True)
    rows: list[Row] = []
    for check in full_plan(args) if args.full else plan(args):
        for row in check():
            rows.append(row)
            print(
                f"  {row.check}: {row.setting}: {row.result} {row.status}",
                file=sys.stderr,
                flush=True,
            )
    print(format_table(rows), file=out, flush=True)
    if args.json is not None:
        report.write_json([dataclasses.asdict(r) for r in rows], args.json)
    return exit_status(rows)
