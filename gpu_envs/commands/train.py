"""``gpu-envs train PRESET|--config FILE [flags] [key=value ...]``: PPO/A2C on Lightning Fabric.

The config comes from a preset or a YAML file, then the flags (named as in Lightning's Fabric PPO
example; each sets a config field), then the ``dotted.path=value`` overrides. The run ends by
printing the experiment folder and the best checkpoint (``ckpt/ckpt_best.pth.tar``, kept by the
periodic greedy evaluation), or the latest one when no evaluation ran.

Also a script, for launchers that take a file path, such as ``fabric run``::

    fabric run --strategy ddp --devices 2 --accelerator cpu \\
        "$(python -m gpu_envs.commands.train --path)" cartpole trainer.total_timesteps=100000

(``python -m gpu_envs.commands.train cartpole`` takes ``gpu-envs train``'s arguments; ``--path``
prints this file's path.) Cheap to import: the trainer is imported when a run starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpu_envs.runs.config import RunConfig


def add_parser(subparsers) -> None:
    """Add ``gpu-envs train`` with the trainer's options (added when it runs: they import torch)."""
    parser = subparsers.add_parser(
        "train",
        help="train policies with PPO/A2C on Lightning Fabric",
        description="Train with PPO/A2C on Lightning Fabric. Multi-process: --devices N "
        "--strategy ddp, or `fabric run --strategy ddp --devices N "
        "$(python -m gpu_envs.commands.train --path) ...`. --print-config shows every config field "
        "(the KEY of KEY=VALUE); docs/config.md documents them and their rules.",
    )
    parser.setup = add_arguments
    parser.set_defaults(func=run, accepts_extra=True)


def run(args: argparse.Namespace, extra: list[str] | None = None) -> int:
    """Train (``train_from``), then say where the results are, or how to resume."""
    summary = train_from(args, extra)
    if summary["status"] == "finished" and summary["experiment"] != str(None):  # rank 0
        print(results_message(Path(summary["experiment"]), summary))
    return exit_code(summary)


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
    from gpu_envs.runs.presets import PRESETS

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
        "--all-ranks",
        action="store_true",
        help="in a multi-process run, every rank prints its own lines, each led by [rank N] "
        "(also: GPU_ENVS_ALL_RANKS=1); by default rank 0 speaks for all, and only warnings and "
        "errors of the other ranks are printed",
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
        and ("=" in args.resume or _names_a_preset(args.resume))
    ):
        # "--resume cartpole" / "--resume my_game" / "--resume key=value": argparse gave the
        # next word to --resume
        if "=" in args.resume:
            overrides.insert(0, args.resume)
        else:
            args.target = args.resume
        args.resume = True
    return overrides


def _names_a_preset(name: str) -> bool:
    """Whether ``name`` is what the ``PRESET`` argument takes: a preset, or any name of a game
    (built in or registered: its preset)."""
    from gpu_envs.games import game
    from gpu_envs.runs.presets import PRESETS

    try:
        return name in PRESETS or bool(game(name))
    except KeyError:
        return False


def build_config(args: argparse.Namespace, extra: list[str] | None = None) -> RunConfig:
    """The resolved ``RunConfig`` of parsed ``args`` (+ unparsed ``extra`` overrides)."""
    from gpu_envs.runs.config import (
        ConfigError,
        RunConfig,
        apply_overrides,
        game_of,
        load_yaml,
        set_fields,
    )
    from gpu_envs.runs.presets import PRESETS, preset

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
        try:  # a preset, or a game's (a registered game without one: the default PPO preset)
            data = preset(target)
        except KeyError as error:
            raise ConfigError(f"{error.args[0]} (or --config FILE)") from None
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
    fields: dict[str, Any] = {
        f"trainer.{name}": getattr(args, name)
        for name in _TRAINER_FLAGS
        if getattr(args, name) is not None
    }
    if args.capture_video:
        fields["trainer.capture_video"] = True
    if args.cuda_graphs is not None:
        fields["trainer.cuda_graphs"] = args.cuda_graphs
    if args.device is not None:
        fields["trainer.accelerator"] = args.device
    if args.lr is not None:
        fields.update({f"policy.{tag}.lr": args.lr for tag in data.get("policy", {})})
    if args.num_steps is not None or args.num_envs is not None:
        given = RunConfig.from_dict(data).trainer
        steps = args.num_steps or given.num_steps  # per env: what --num-envs keeps
        fields["trainer.train_batch_size"] = steps * (args.num_envs or given.num_envs)
    data = set_fields(data, fields)
    return RunConfig.from_dict(apply_overrides(data, overrides))


def _run_folder(path: Path) -> Path:
    """The experiment folder of a ``--resume`` path (the folder, its ckpt/ or a checkpoint)."""
    if path.is_file():
        path = path.parent
    return path.parent if path.name == "ckpt" else path


def joined_launch(config: RunConfig, environ: Mapping[str, str]) -> RunConfig:
    """``config`` joined to the processes a launcher started (``launcher_layout``), so that they
    train one DDP run rather than that many copies. A config left at one process takes the
    launcher's layout (``ddp``); one whose ``devices`` or ``num_nodes`` contradict it is refused,
    naming both. ``fabric run`` (``LT_CLI_USED``) is joined by the trainer itself."""
    from gpu_envs.runs.config import ConfigError

    layout = launcher_layout(environ)
    if layout is None or environ.get("LT_CLI_USED") == "1":
        return config
    world, devices, nodes, launcher = layout
    tc = config.trainer
    if (tc.devices, tc.num_nodes) not in ((1, 1), (devices, nodes)):
        raise ConfigError(
            f"trainer.devices={tc.devices}, trainer.num_nodes={tc.num_nodes}: {launcher} "
            f"started {world} processes ({devices} per node x {nodes} nodes); give "
            f"--devices {devices} --num-nodes {nodes}, or neither"
        )
    strategy = "ddp" if tc.strategy == "auto" else tc.strategy
    trainer = dataclasses.replace(tc, devices=devices, num_nodes=nodes, strategy=strategy)
    return dataclasses.replace(config, trainer=trainer)


def launcher_layout(environ: Mapping[str, str]) -> tuple[int, int, int, str] | None:
    """``(processes, per node, nodes, launcher)`` of the launcher that started this process with
    others, or None: ``torchrun`` (also under SLURM or ``fabric run``: ``WORLD_SIZE``,
    ``LOCAL_WORLD_SIZE``), else SLURM's ``srun`` as Fabric's ``SLURMEnvironment`` reads it
    (``SLURM_NTASKS``, ``SLURM_NTASKS_PER_NODE``, ``SLURM_NNODES``; not in a job named ``bash`` or
    ``interactive``)."""
    world = int(environ.get("WORLD_SIZE", "1") or "1")
    if world > 1:
        local = int(environ.get("LOCAL_WORLD_SIZE", world))
        return world, local, max(world // local, 1), "the launcher"
    tasks = int(environ.get("SLURM_NTASKS", "1") or "1")
    per_node = environ.get("SLURM_NTASKS_PER_NODE")
    if tasks <= 1 or per_node is None or environ.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return None  # (Fabric refuses SLURM_NTASKS > 1 without SLURM_NTASKS_PER_NODE, saying so)
    local = int(per_node.split("(")[0])
    return tasks, local, int(environ.get("SLURM_NNODES", max(tasks // local, 1))), "SLURM (srun)"


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

    A bad config, an unusable checkpoint or run folder, or a diverging run exits with its message.
    """
    from gpu_envs.runs.config import ConfigError, to_yaml

    try:
        config = build_config(args, extra)
    except ConfigError as error:
        raise SystemExit(f"gpu-envs train: error: {error}") from None
    if args.print_config:
        print(to_yaml(config), end="")
        raise SystemExit(0)
    try:
        config = joined_launch(config, os.environ)
    except ConfigError as error:
        raise SystemExit(f"gpu-envs train: error: {error}") from None
    if config.trainer.accelerator in ("cuda", "gpu"):
        from gpu_envs.engine.devices import cuda_available

        if not cuda_available():
            raise SystemExit(
                "gpu-envs train: error: --device cuda (trainer.accelerator): no usable CUDA GPU "
                "here (torch and numba-cuda see none); use --device cpu or auto"
            )
    set_launch_environment(args)
    from gpu_envs.runs import console

    all_ranks = getattr(args, "all_ranks", False) or console.all_ranks_asked()
    console.hear_ranks(all_ranks)
    console.hush_third_party()
    from gpu_envs.cli import error_line
    from gpu_envs.trainers.fabric_loop import train

    try:
        return train(config, resume=args.resume)
    except KeyboardInterrupt:
        message = (
            "gpu-envs train: aborted without saving (Ctrl-C during set-up, or twice); the "
            "checkpoints saved before are kept"
        )
        _exit_now_if_distributed(130, message, every_rank=all_ranks)
        print(message, file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    except Exception as error:  # the CLI's error policy (``cli.guarded``), here for every rank
        line = error_line("gpu-envs train", error)
        _exit_now_if_distributed(1, line or traceback.format_exc().rstrip())
        if line is None:
            raise
        raise SystemExit(line) from error


def _exit_now_if_distributed(code: int, message: str, every_rank: bool = True) -> None:
    """In a process of a multi-process run that raised: ``message`` on stderr, naming this rank
    (``rank_said``; ``every_rank`` False: rank 0 alone says it, as for a Ctrl-C that reached
    every rank), then exit status ``code`` at once (``os._exit``; the run's files are closed by
    then). Its process group's threads may still wait for a failed rank, and the interpreter's
    exit could abort on them (SIGABRT) or wait for them. A run that ends well leaves its group in
    ``train`` (``fabric_loop.leave_process_group``)."""
    import torch.distributed

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        if every_rank or rank == 0:
            said = rank_said(message, rank, world) if every_rank else message
            print(said, file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)


def rank_said(message: str, rank: int, world: int) -> str:
    """``message`` of rank ``rank`` of ``world`` processes, naming it: ``gpu-envs train: error:
    rank 1 of 2: <cause>`` (``gpu-envs train: rank 1 of 2: <text>`` for another line of the
    command), or ``gpu-envs train: rank 1 of 2 failed:`` above a traceback (a message that names
    it already, or of a process alone, as it is)."""
    who = f"rank {rank} of {world}"
    if world == 1 or who in message.split("\n", 1)[0]:
        return message
    for head in ("gpu-envs train: error: ", "gpu-envs train: "):
        if message.startswith(head):
            return f"{head}{who}: {message.removeprefix(head)}"
    return f"gpu-envs train: {who} failed:\n{message}"


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
    from gpu_envs.runs.run_control import EXIT_CODES

    return EXIT_CODES[summary["reason"]]


def results_message(experiment: Path, summary: dict | None = None) -> str:
    """Where a finished run's experiment folder and best (or latest) checkpoint are; with the
    run's ``summary``, why it ended and the command that scores the best checkpoint again (a Tag
    run: the command that scores its teams against random ones, ``gpu-envs evaluate tag``)."""
    best = experiment / "ckpt" / "ckpt_best.pth.tar"
    reason = f" ({summary['reason']})" if summary else ""
    if best.is_file():
        checkpoint = _evaluate_hint(summary) + f"best checkpoint: {best}"
    else:
        saved = sorted(
            (experiment / "ckpt").glob("iteration_*.pth.tar"),
            key=lambda p: int(p.name.split("_")[1].split(".")[0]),
        )
        checkpoint = "no best checkpoint (no evaluation ran: evaluation.eval_freq); " + (
            f"latest checkpoint: {saved[-1]}" if saved else "no checkpoint saved"
        )
    return (
        f"experiment folder: {experiment}{reason}\n{_speed_line(summary)}"
        f"{_matchups_hint(summary)}{checkpoint}"
    )


def _speed_line(summary: dict | None) -> str:
    """The run's training time (evaluations, saving and plotting excluded) and its env-steps/s."""
    if not summary:
        return ""
    seconds = summary.get("update_seconds") or summary.get("train_seconds")
    if not seconds:
        return ""
    digits = 2 if seconds < 10 else 1
    return (
        f"training time: {seconds:.{digits}f} s for {summary['env_steps']:,} env steps "
        f"({summary['env_steps'] / seconds:,.0f} env-steps/s, greedy evaluations excluded)\n"
    )


def _evaluate_hint(summary: dict | None) -> str:
    """The best evaluation's line, with the command that prints it again (the same episodes)."""
    if not summary or "evaluate_command" not in summary:
        return ""
    return (
        f"best evaluation: greedy mean return {summary['best_eval']:.2f}; "
        f"`{summary['evaluate_command']}` prints the same\n"
    )


def _matchups_hint(summary: dict | None) -> str:
    """A Tag run's line with the command that scores its teams against random ones."""
    if not summary or "matchups_command" not in summary:
        return ""
    return (
        f"trained teams against random ones (runners tagged per episode): "
        f"`{summary['matchups_command']}`\n"
    )


def main(argv: list[str] | None = None) -> int:
    """The script entry (``python -m gpu_envs.commands.train``), under the CLI's error policy
    (``cli.guarded``)."""
    from gpu_envs.cli import guarded

    argv = sys.argv[1:] if argv is None else argv
    return guarded("gpu-envs train", lambda: _script(argv), argv)


def _script(argv: list[str]) -> int:
    if argv == ["--path"]:
        print(__file__)
        return 0
    from gpu_envs.cli import add_debug_flag
    from gpu_envs.engine.first_compile import show_on_stderr

    show_on_stderr()
    parser = argparse.ArgumentParser(
        prog="gpu_envs.commands.train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    add_debug_flag(parser)
    args, extra = parser.parse_known_args(argv)
    return run(args, extra)


if __name__ == "__main__":
    sys.exit(main())
