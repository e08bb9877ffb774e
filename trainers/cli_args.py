"""Command-line arguments of ``gpu-envs train`` and of the ``fabric run`` script (``run.py``).

``gpu-envs train PRESET|--config FILE [flags] [dotted.path=value ...]``: the config comes from a
preset or a YAML file, then the Fabric PPO example's flags, then the overrides. Cheap to import
(no lightning).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpu_envs.trainers.config import (
    ConfigError,
    RunConfig,
    apply_overrides,
    game_of,
    load_yaml,
    to_yaml,
)
from gpu_envs.trainers.presets import PRESETS, preset

#: The flags that set a ``trainer`` field of the same name.
_TRAINER_FLAGS = (
    "total_timesteps",
    "num_envs",
    "seed",
    "accelerator",
    "devices",
    "strategy",
    "num_nodes",
)


def _devices(text: str):
    return int(text) if text.isdigit() else text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The train command's arguments (flags named as in Lightning's Fabric PPO example)."""
    parser.add_argument(
        "target",
        nargs="?",
        metavar="PRESET",
        help=f"bundled config: {', '.join(PRESETS)} (or use --config / --env-id)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="config overrides, e.g. trainer.num_envs=64 policy.runner.lr=0.001",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="YAML run config (the seed run config shape)"
    )
    parser.add_argument(
        "--env-id", help="game: CartPole-v1 / cartpole or Tag-v0 / tag (picks its preset)"
    )
    parser.add_argument(
        "--total-timesteps", type=int, help="env steps over all ranks (trainer.total_timesteps)"
    )
    parser.add_argument(
        "--num-envs",
        type=int,
        help="envs per rank (trainer.num_envs); the rollout steps per env stay the config's, as in "
        "CleanRL: train_batch_size = num_steps * num_envs",
    )
    parser.add_argument(
        "--num-steps",
        type=int,
        help="rollout steps per env (train_batch_size = num_steps * num_envs)",
    )
    parser.add_argument("--lr", type=float, help="learning rate of every policy (policy.<tag>.lr)")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        help="where the envs and networks run (trainer.accelerator)",
    )
    parser.add_argument(
        "--seed", type=int, help="base seed; env i of rank r gets seed + r * num_envs + i"
    )
    parser.add_argument(
        "--capture-video", action="store_true", help="write greedy episode videos at evaluations"
    )
    parser.add_argument(
        "--cuda-graphs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="on CUDA, replay each rollout as one captured CUDA graph (trainer.cuda_graphs; on by "
        "default, ignored on the CPU)",
    )
    parser.add_argument("--accelerator", choices=("auto", "cpu", "cuda", "gpu"))
    parser.add_argument("--devices", type=_devices, help="processes (devices) per node, or 'auto'")
    parser.add_argument("--strategy", help="Fabric strategy: auto, ddp, ...")
    parser.add_argument("--num-nodes", type=int)
    parser.add_argument(
        "--node-rank", type=int, help="this node's rank (multi-node; sets NODE_RANK)"
    )
    parser.add_argument("--main-address", help="address of the rank-0 node (sets MASTER_ADDR)")
    parser.add_argument("--main-port", type=int, help="port on the rank-0 node (sets MASTER_PORT)")
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="PATH",
        help="continue the newest unfinished run of this config, or the run (folder or "
        "checkpoint) at PATH; with PATH alone the config is the run's own",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config as YAML (every field, with the overrides) and exit",
    )


def _overrides(args: argparse.Namespace, extra: list[str] | None) -> list[str]:
    """The ``KEY=VALUE`` words, wherever argparse put them; sets ``args.target`` and
    ``args.resume`` to what the words meant."""
    overrides = list(args.overrides or []) + list(extra or [])
    if args.target is not None and "=" in args.target:
        overrides.insert(0, args.target)
        args.target = None
    if (
        isinstance(args.resume, str)
        and not os.path.exists(args.resume)
        and (args.resume in PRESETS or "=" in args.resume)
    ):
        # "--resume cartpole" / "--resume key=value": argparse gave the next word to --resume
        if "=" in args.resume:
            overrides.insert(0, args.resume)
        else:
            args.target = args.resume
        args.resume = True
    return overrides


def build_config(args: argparse.Namespace, extra: list[str] | None = None) -> RunConfig:
    """The resolved ``RunConfig`` of parsed ``args`` (+ unparsed ``extra`` overrides)."""
    overrides = _overrides(args, extra)
    target = args.target
    flags = [e for e in overrides if e.startswith("-")]
    if flags:
        raise ConfigError(f"unrecognized argument(s): {' '.join(flags)}")
    if target is not None and args.config is not None:
        raise ConfigError("give either a preset name or --config FILE, not both")
    if args.config is not None:
        data = load_yaml(args.config)
    elif target is not None:
        if target not in PRESETS:
            raise ConfigError(
                f"unknown preset {target!r}; available: {', '.join(PRESETS)} (or --config FILE)"
            )
        data = preset(target)
    elif args.env_id is not None:
        data = preset(game_of(args.env_id))
    elif isinstance(args.resume, str):
        data = load_yaml(_run_folder(Path(args.resume)) / "total_config.yaml")
    else:
        raise ConfigError(
            f"nothing to train: give a preset ({', '.join(PRESETS)}), --config FILE or --env-id "
            "(or --resume RUN_FOLDER)"
        )
    if args.env_id is not None and game_of(args.env_id) != game_of(str(data.get("name", ""))):
        raise ConfigError(
            f"--env-id {args.env_id} does not match the config's game {data.get('name')!r}"
        )
    flag_overrides = [
        f"trainer.{name}={getattr(args, name)}"
        for name in _TRAINER_FLAGS
        if getattr(args, name) is not None
    ]
    if args.capture_video:
        flag_overrides.append("trainer.capture_video=true")
    if args.cuda_graphs is not None:
        flag_overrides.append(f"trainer.cuda_graphs={str(args.cuda_graphs).lower()}")
    if args.device is not None:
        flag_overrides.append(f"trainer.accelerator={args.device}")
    if args.lr is not None:
        flag_overrides += [f"policy.{tag}.lr={args.lr}" for tag in data.get("policy", {})]
    steps = RunConfig.from_dict(data).trainer.num_steps  # per env: what --num-envs keeps
    data = apply_overrides(data, flag_overrides)
    if args.num_steps is not None or args.num_envs is not None:
        batch = (args.num_steps or steps) * data["trainer"]["num_envs"]
        data = apply_overrides(data, [f"trainer.train_batch_size={batch}"])
    return RunConfig.from_dict(apply_overrides(data, overrides))


def _run_folder(path: Path) -> Path:
    """The experiment folder of a ``--resume`` path (the folder, its ckpt/ or a checkpoint)."""
    if path.is_file():
        path = path.parent
    return path.parent if path.name == "ckpt" else path


def set_launch_environment(args: argparse.Namespace) -> None:
    """Multi-node rendezvous from the flags (what Fabric's launcher reads)."""
    for flag, variable in (
        ("node_rank", "NODE_RANK"),
        ("main_address", "MASTER_ADDR"),
        ("main_port", "MASTER_PORT"),
    ):
        value = getattr(args, flag)
        if value is not None:
            os.environ[variable] = str(value)


def train_from(args: argparse.Namespace, extra: list[str] | None = None) -> dict:
    """Build the config, then train (imports torch and lightning only now): the run's summary.

    A bad config, an unusable checkpoint or a diverging run exits with its message.
    """
    try:
        config = build_config(args, extra)
    except ConfigError as error:
        raise SystemExit(f"gpu-envs train: error: {error}") from None
    if args.print_config:
        print(to_yaml(config), end="")
        raise SystemExit(0)
    set_launch_environment(args)
    from gpu_envs.trainers.checkpoint import CheckpointError
    from gpu_envs.trainers.fabric_loop import train
    from gpu_envs.trainers.learner import NonFiniteError

    try:
        return train(config, resume=args.resume)
    except (CheckpointError, NonFiniteError) as error:
        raise SystemExit(f"gpu-envs train: error: {error}") from None
    except KeyboardInterrupt:
        print(
            "gpu-envs train: aborted without saving (Ctrl-C during set-up, or twice); the "
            "checkpoints saved before are kept",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(130) from None


def exit_code(summary: dict) -> int:
    """0 for a finished run; 130 (SIGINT) or 143 (SIGTERM) for an interrupted one, after saying
    in one line how to resume it."""
    if summary["status"] != "interrupted":
        return 0
    if summary["experiment"] != str(None):  # rank 0
        print(
            f"gpu-envs train: stopped by {summary['reason']} at iteration {summary['iterations']}"
            f"/{summary['num_iterations']}, saved {summary['checkpoint']}; resume with: "
            f"{summary['resume_command']}",
            flush=True,
        )
    from gpu_envs.trainers.run_control import EXIT_CODES

    return EXIT_CODES[summary["reason"]]


def run(args: argparse.Namespace, extra: list[str] | None = None) -> int:
    """``train_from`` for script entries: its ``exit_code``."""
    return exit_code(train_from(args, extra))
