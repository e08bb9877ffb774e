"""What ``gpu-envs device-check`` runs, in order, and (``--full``) how long each part should take.

A run is a list of :class:`Check`: one call that returns rows, in one part of the script. The
parts of ``--full`` (:data:`PARTS`) can be run alone (``--only``); :func:`format_plan` is the
printout at the start of a run, each part with its estimated seconds on one H200.

Basis of the estimates (``ESTIMATE_*``; seconds on one H200 and the server CPU beside it, not
measured there: no GPU run has landed). Host work was measured on the 2-core development box
(Intel Xeon, shared, 2026-12-03) in process CPU seconds on one thread, and is taken as is for the
server's cores; the device's own time is small beside it at these sizes except where said.

- parity: per compared step, the reference env's step on the CPU, the copy of every field to the
  host and their comparison: ~1 ms + per env 0.4-2 us (CartPole 0.5, Pendulum 0.6, Acrobot 2.0,
  MountainCar 0.4) or per Tag game 0.66 ms (measured CPU against CPU), plus ~0.3 ms for the GPU
  side (its launch and ~20 device-to-host copies, assumed). Loading a game's kernels from the
  cache ~1 s per check.
- kernel compile (before the parity checks, every check's envs at once, one process per check,
  :mod:`gpu_envs.device_check.compile`): the slowest alone, MountainCarContinuous (45 s of
  cold CPU compile measured per dtype) plus its CUDA compile (~10 s, assumed) and the start of a
  process (~5 s). In series, the games' cold CPU compiles alone add up to ~230 s.
- lean step, per size: the env's allocation and reset (~1 s), then per launch kind (plain, graph)
  its first call or capture (~0.5 s), the warm-up and the timed repeats (``--warmup-seconds``,
  ``--repeats`` x ``--target-seconds``) and the host steps (assumed 1 ns of device time per
  agent-step); a CUDA compile (~5 s, assumed) at each game and dtype's first size.
- trainer, per run: Fabric, the envs, the warm-up and the graph capture ~8 s; ``torch.compile`` of
  the CartPole preset's gradient step (Inductor, Triton) ~45 s cold, ~10 s from the caches the
  first run filled; per iteration CartPole ~0.05 s, Tag's seed run config ~0.4 s (assumed).
- DDP row (2 GPUs against 1, when the machine has 2): two fresh ``gpu-envs train`` commands,
  each a process start and the trainer's setup, plus NCCL's start of the 2-process run (~5 s,
  assumed) and their iterations; ~0.1 s when it is skipped.
- first step, per fresh process: imports, CUDA context, env and reset ~6 s, plus the cold compile
  (CartPole ~8 s, Tag ~20 s; assumed from the CPU's compile times).
- start: importing torch and numba, the CUDA context: ~10 s.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from functools import partial

from gpu_envs.device_check import lean, rows
from gpu_envs.device_check.compile import warm_caches
from gpu_envs.device_check.rows import ParitySpec, Row
from gpu_envs.device_check.trainer import (
    DDP_ROW,
    ddp_skip_reason,
    ddp_throughput,
    trainer_overrides,
    trainer_throughput,
)

#: The parts of --full, in order (the names of --only).
PARTS = ("parity", "lean", "trainer", "first-step")
#: Games with a parity spec of their own; the registry's others get :func:`rows.game_spec`.
DEDICATED_PARITY = ("cartpole", "tag")

ESTIMATE_START_S = 10.0
ESTIMATE_PARITY_STEP_S = 1.3e-3
ESTIMATE_PARITY_ENV_STEP_S = {
    "cartpole": 0.5e-6,
    "pendulum": 0.6e-6,
    "acrobot": 2.0e-6,
    "mountaincar": 0.4e-6,
    "mountaincar-continuous": 0.6e-6,
    "tag": 0.66e-3,
}
ESTIMATE_PARITY_OTHER_ENV_STEP_S = 2.0e-6  # a game not measured yet
ESTIMATE_PARITY_LOAD_S = 1.0
ESTIMATE_COMPILE_S = 60.0
ESTIMATE_LEAN_SETUP_S = 1.0
ESTIMATE_LEAN_FIRST_CALL_S = 0.5
ESTIMATE_LEAN_COMPILE_S = 5.0
ESTIMATE_AGENT_STEP_S = 1e-9
ESTIMATE_TRAINER_SETUP_S = 8.0
ESTIMATE_COMPILE_COLD_S, ESTIMATE_COMPILE_WARM_S = 45.0, 10.0
ESTIMATE_ITERATION_S = {"cartpole": 0.05, "tag": 0.4}
ESTIMATE_PROCESS_S = 6.0
ESTIMATE_FIRST_COMPILE_S = {"cartpole": 8.0, "tag": 20.0}
ESTIMATE_NCCL_START_S, ESTIMATE_SKIPPED_S = 5.0, 0.1

#: game -> (env count, dtype) of the --full lean rows, and of --full --small. CartPole in both
#: dtypes at 2^20 envs: issue 36's targets. Every dtype named: the default depends on the device.
FULL_LEAN = {
    "cartpole": ((4096, "float64"), (65536, "float64"), (2**20, "float64"), (2**20, "float32")),
    "pendulum": ((4096, "float64"), (65536, "float64"), (2**20, "float64")),
    "tag": ((1000, "float32"), (10000, "float32")),
}
SMALL_LEAN = {
    "cartpole": ((8, "float64"),),
    "pendulum": ((8, "float64"),),
    "tag": ((2, "float32"),),
}
#: Agents per game of the lean rows (Tag's seed config: 5 taggers + 100 runners; else 1).
AGENTS = {"tag": 105}
#: CartPole envs per GPU of the --full DDP row, and of --full --small.
DDP_ENVS, SMALL_DDP_ENVS = 4096, 8


@dataclasses.dataclass
class Check:
    """One call of the run: ``run()`` returns its rows; ``estimate_s``: its seconds on one H200
    (None: not estimated)."""

    part: str
    what: str
    run: Callable[[], list[Row]]
    estimate_s: float | None = None


# --------------------------------------------------------------------------------------- parity
def quick(args: argparse.Namespace) -> None:
    """``--quick`` (and ``--full --small``): sizes the CUDA simulator runs in minutes."""
    args.parity_envs, args.parity_steps, args.max_episode_steps = 16, 60, 12
    args.tag_parity_envs, args.tag_parity_steps, args.skip_throughput = 2, 12, True
    args.tag_params = lean.SMALL_TAG


def parity_specs(args: argparse.Namespace) -> list[ParitySpec]:
    """Every parity check: CartPole in both dtypes and autoreset modes, the registry's other
    single-agent games (:data:`gpu_envs.games.GAMES`) in both dtypes, Tag."""
    from gpu_envs import games

    sizes = dict(num_envs=args.parity_envs, steps=args.parity_steps)
    specs = [
        rows.cartpole_spec(
            dtype=dtype, autoreset_mode=mode, max_episode_steps=args.max_episode_steps, **sizes
        )
        for dtype in ("float64", "float32")
        for mode in ("next_step", "same_step")
    ]
    specs += [
        rows.game_spec(name, dtype=dtype, max_episode_steps=args.max_episode_steps, **sizes)
        for name in games.GAMES
        if name not in DEDICATED_PARITY
        for dtype in ("float64", "float32")
    ]
    specs.append(
        rows.tag_spec(
            num_envs=args.tag_parity_envs,
            steps=args.tag_parity_steps,
            params=getattr(args, "tag_params", None),
        )
    )
    return specs


def parity_estimate(spec: ParitySpec) -> float:
    """Seconds of ``spec``'s check (see the module's basis)."""
    per_env = ESTIMATE_PARITY_ENV_STEP_S.get(spec.game, ESTIMATE_PARITY_OTHER_ENV_STEP_S)
    step = ESTIMATE_PARITY_STEP_S + spec.num_envs * per_env
    return ESTIMATE_PARITY_LOAD_S + (spec.steps + 1) * step


def parity_check(spec: ParitySpec, device: str) -> Check:
    """``spec``'s parity check on ``device`` against the CPU, with its estimate."""
    return Check(
        "parity",
        f"{spec.game} parity, {spec.setting}",
        lambda: [rows.parity_row(spec, device)],
        parity_estimate(spec),
    )


# --------------------------------------------------------------------------------------- plans
def plan(args: argparse.Namespace) -> list[Check]:
    """The checks of a plain run, in order: the parity checks, then (unless
    ``--skip-throughput``) CartPole's and Tag's throughput over their size ranges, Tag's 1000-agent
    scale point and the trainer's end-to-end throughput."""
    if args.quick:
        quick(args)
    timing = dict(
        repeats=args.repeats, target_seconds=args.target_seconds, warmup_seconds=args.warmup_seconds
    )
    device = args.device
    checks = [parity_check(spec, device) for spec in parity_specs(args)]
    if args.skip_throughput:
        return checks
    throughput = (  # (what, whether it runs, its call)
        (
            "cartpole throughput",
            True,
            partial(rows.cartpole_throughput, device, args.cartpole_log2, timing),
        ),
        ("tag throughput", True, partial(rows.tag_throughput, device, args.tag_log2, timing)),
        (
            "tag scale throughput",
            args.tag_scale_envs > 0,
            partial(rows.tag_scale_throughput, device, args.tag_scale_envs, timing),
        ),
        (
            "trainer throughput",
            args.trainer_iterations > 0,
            partial(trainer_throughput, device, args.trainer_iterations),
        ),
    )
    return checks + [Check("throughput", what, run) for what, wanted, run in throughput if wanted]


def full_plan(args: argparse.Namespace) -> list[Check]:
    """``--full``: the kernel compile and every parity check, the lean step's throughput with
    plain launches and graph replay, the trainer with graphs on and off and on 2 GPUs against 1
    (skipped with fewer), the first step of a fresh process (``--small``: CI sizes, no separate
    compile); only the parts of ``args.only``."""
    import torch

    small, device = args.small, args.device
    if small:
        quick(args)
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
    only = getattr(args, "only", None) or PARTS
    checks: list[Check] = []
    specs = parity_specs(args)
    if not small:
        checks.append(
            Check(
                "parity", "kernel compile", partial(warm_caches, specs, device), ESTIMATE_COMPILE_S
            )
        )
    checks += [parity_check(spec, device) for spec in specs]

    per_launch = ESTIMATE_LEAN_FIRST_CALL_S + options["warmup_seconds"]
    per_launch += options["repeats"] * options["target_seconds"]
    for game, sizes in (SMALL_LEAN if small else FULL_LEAN).items():
        compiled: set = set()
        for num_envs, dtype in sizes:
            host = lean.HOST_STEPS * num_envs * AGENTS.get(game, 1) * ESTIMATE_AGENT_STEP_S
            estimate = ESTIMATE_LEAN_SETUP_S + 2 * (per_launch + host)
            if "parity" not in only and dtype not in compiled:  # (else the parity compiled it)
                estimate += ESTIMATE_LEAN_COMPILE_S
            compiled.add(dtype)
            checks.append(
                Check(
                    "lean",
                    f"{game} lean step, {num_envs} envs, {dtype}",
                    partial(lean.lean_throughput, game, num_envs, device, small, options, dtype),
                    estimate,
                )
            )

    compile_s = ESTIMATE_COMPILE_COLD_S
    for game in ("cartpole", "tag"):
        # (the trainer ignores cuda_graphs on the CPU, where the simulator's trainer runs too)
        for graphs in (False, True) if torch.cuda.is_available() else (False,):
            estimate = (
                ESTIMATE_TRAINER_SETUP_S + args.trainer_iterations * ESTIMATE_ITERATION_S[game]
            )
            if game == "cartpole":  # (the preset compiles its step; Tag's does not)
                estimate += compile_s
                compile_s = ESTIMATE_COMPILE_WARM_S
            overrides = trainer_overrides(game, small)
            checks.append(
                Check(
                    "trainer",
                    f"trainer throughput, {game}, cuda_graphs={graphs}",
                    partial(
                        trainer_throughput, device, args.trainer_iterations, overrides, game, graphs
                    ),
                    estimate,
                )
            )

    ddp_iterations = max(2, args.trainer_iterations)
    ddp_estimate = ESTIMATE_SKIPPED_S
    if ddp_skip_reason(device) is None:
        ddp_estimate = 2 * (ESTIMATE_PROCESS_S + ESTIMATE_TRAINER_SETUP_S) + ESTIMATE_NCCL_START_S
        ddp_estimate += 2 * ddp_iterations * ESTIMATE_ITERATION_S["cartpole"]
    ddp_envs = SMALL_DDP_ENVS if small else DDP_ENVS
    checks.append(
        Check(
            "trainer",
            DDP_ROW,
            partial(ddp_throughput, device, ddp_envs, ddp_iterations),
            ddp_estimate,
        )
    )

    from gpu_envs.games.tag.seed import seed_config

    first_steps = {
        "cartpole": {"dtype": "float64"},
        "tag": lean.SMALL_TAG if small else seed_config(),
    }
    for game, kwargs in first_steps.items():
        num_envs = (SMALL_LEAN if small else FULL_LEAN)[game][0][0]
        checks.append(
            Check(
                "first-step",
                f"first step, {game}, {num_envs} envs, cold and warm",
                partial(lean.first_step_rows, game, device, num_envs, kwargs, not small),
                2 * ESTIMATE_PROCESS_S + ESTIMATE_FIRST_COMPILE_S[game],
            )
        )
    return [check for check in checks if check.part in only]


def format_plan(checks: list[Check], title: str) -> str:
    """The printout at the start of a run: each part, its checks and estimated seconds, the
    total."""
    lines = [title, f"  {'start':<11} {'':10} ~{ESTIMATE_START_S:5.0f} s"]
    for part in dict.fromkeys(check.part for check in checks):
        mine = [check for check in checks if check.part == part]
        seconds = sum(check.estimate_s or 0.0 for check in mine)
        lines.append(f"  {part:<11} {len(mine):>3} checks ~{seconds:5.0f} s")
    total = total_estimate(checks)
    lines.append(f"  {'total':<11} {'':10} ~{total:5.0f} s ({total / 60:.1f} min)")
    return "\n".join(lines)


def total_estimate(checks: list[Check]) -> float:
    """The run's estimated seconds: the start and every check."""
    return ESTIMATE_START_S + sum(check.estimate_s or 0.0 for check in checks)
