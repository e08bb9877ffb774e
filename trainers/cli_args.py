"""Command-line arguments of ``gpu-envs train`` and of the ``fabric run`` script (``trainers/run.py``).

``gpu-envs train cartpole|tag|--config FILE [flags] [dotted.path=value ...]``: the config comes from
a preset or a YAML file, then the Fabric PPO example's flags, then the overrides. Cheap to import
(no torch, no lightning).
"""

from __future__ import annotations

import argparse
import os

from gpu_envs.trainers.config import ConfigError, RunConfig, apply_overrides, game_of, load_yaml
from gpu_envs.trainers.presets import PRESETS, preset

_FLAG_FIELDS = {
    "total_timesteps": "total_timesteps",
    "num_envs": "num_envs",
    "seed": "seed",
    "accelerator": "accelerator",
    "devices": "devices",
    "strategy": "strategy",
    "num_nodes": "num_nodes",
}


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
    parser.add_argument("--num-envs", type=int, help="envs per rank (trainer.num_envs)")
    parser.add_argument(
        "--num-steps",
        type=int,
        help="rollout steps per env (train_batch_size = num_steps * num_envs)",
    )
    parser.add_argument(
        "--seed", type=int, help="base seed; env i of rank r gets seed + r * num_envs + i"
    )
    parser.add_argument(
        "--capture-video", action="store_true", help="write greedy episode videos at evaluations"
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
        help="continue from the latest checkpoint of the experiment folder, or from PATH",
    )


def build_config(args: argparse.Namespace, extra: list[str] | None = None) -> RunConfig:
    """The resolved ``RunConfig`` of parsed ``args`` (+ unparsed ``extra`` overrides)."""
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
    target = args.target
    flags = [e for e in overrides if e.startswith("-")]
    if flags:
        raise ConfigError(f"unrecognized argument(s): {' '.join(flags)}")
    sources = [s for s in (target, args.config) if s is not None]
    if len(sources) > 1:
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
    else:
        raise ConfigError(
            "nothing to train: give a preset (cartpole, tag), --config FILE or --env-id"
        )
    if args.env_id is not None and game_of(args.env_id) != game_of(str(data.get("name", ""))):
        raise ConfigError(
            f"--env-id {args.env_id} does not match the config's game {data.get('name')!r}"
        )
    trainer = data.setdefault("trainer", {})
    for flag, name in _FLAG_FIELDS.items():
        value = getattr(args, flag)
        if value is not None:
            trainer[name] = value
    if args.capture_video:
        trainer["capture_video"] = True
    if args.num_steps is not None:
        trainer["train_batch_size"] = args.num_steps * trainer.get("num_envs", 50)
    return RunConfig.from_dict(apply_overrides(data, overrides))


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


def run(args: argparse.Namespace, extra: list[str] | None = None) -> int:
    """Build the config, then train (imports torch and lightning only now)."""
    try:
        config = build_config(args, extra)
    except ConfigError as error:
        raise SystemExit(f"gpu-envs train: error: {error}") from None
    set_launch_environment(args)
    from gpu_envs.trainers.checkpoint import CheckpointError
    from gpu_envs.trainers.fabric_loop import train
    from gpu_envs.trainers.learner import NonFiniteError

    try:
        train(config, resume=args.resume)
    except (CheckpointError, NonFiniteError) as error:
        raise SystemExit(f"gpu-envs train: error: {error}") from None
    return 0
