"""Console output: the start banner, a compact line per policy or the original framework's
blocks, and the progress (a bar on a terminal, plain lines otherwise).

``policy_block`` (and ``timing.SpeedMeter.block``) return the ``name : value`` lines
(40-character names) that the original printed every ``metrics_log_freq`` iterations
(``saving.console: blocks``); the same dicts go to results.json. ``compact_line`` is the default
console form of the same window.

Multi-process runs (``hear_ranks``): rank 0 alone says what every rank does alike (a compile line,
the gradient step chosen), unless every rank is asked for (``GPU_ENVS_ALL_RANKS=1``, or
``gpu-envs train --all-ranks``); warnings and errors of any rank are said, led by ``[rank N]``.
Third-party lines that are noise to a gpu-envs user (``hush_third_party``): Lightning's install
tips, and the deprecation warnings of torch APIs that Lightning and DDP call, not ours to fix.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
import warnings
from typing import TYPE_CHECKING

from gpu_envs.runs.metrics import IterationRecord, episode_summary

if TYPE_CHECKING:
    from gpu_envs.trainers.rollout import PolicyGroup

RULE = "=" * 40
#: What the console prints for an episode statistic of a window in which no episode ended (the
#: block holds None there: results.json writes null).
NO_EPISODE = "no episode ended in this window"
SPEED_TITLE = "Speed performance stats"


def policy_block(
    group: PolicyGroup, records: list[IterationRecord], heads: int
) -> dict[str, float | None]:
    """``group``'s metrics by the original's names: the learner statistics of the last record, the
    episodes of all ``records`` (None when no episode ended in them)."""
    cfg, last = group.config, records[-1].policies[group.tag]
    episodes = episode_summary(records, group.tag)
    reward = None if math.isnan(episodes["reward_mean"]) else episodes["reward_mean"]
    values = {
        "VF loss coefficient": cfg.vf_loss_coeff,
        "Entropy coefficient": cfg.entropy_coeff,
        "Total loss": last["total_loss"],
        "Policy loss": last["policy_loss"],
        "Value function loss": last["value_loss"],
        "Mean rewards": last["reward_mean"],
        "Max. rewards": last["reward_max"],
        "Min. rewards": last["reward_min"],
        "Mean value function": last["value_mean"],
        "Mean advantages": last["advantage_mean"],
        "Mean (norm.) advantages": last["norm_advantage_mean"]
        if cfg.normalize_advantage
        else last["advantage_mean"],
        "Mean (discounted) returns": last["return_mean"],
        "Mean entropy": last["entropy"],
        "Variance explained by the value function": last["explained_variance"],
    }
    for h in range(heads):
        for axis in ("agents", "envs", "time"):
            values[f"Std. of action_{h} over {axis}"] = last[f"action_{h}_std_{axis}"]
    values.update(
        {
            "Current timestep": float(records[-1].env_step),
            "Gradient norm": last["grad_norm"],
            "Learning rate": last["cur_lr"],
            "Approx. KL": last["approx_kl"],
            "Clip fraction": last["clip_fraction"],
            "Mean episodic reward": reward,
            "Mean episodic reward per agent": None if reward is None else reward / group.num_agents,
        }
    )
    return values


def format_blocks(blocks: dict[str, dict], speed: dict | None) -> str:
    """Every policy's block (``blocks``: tag -> ``policy_block``), then the speed block (if
    given)."""
    parts = [format_block(f"Metrics for policy '{tag}'", block) for tag, block in blocks.items()]
    if speed is not None:
        parts.append(format_block(SPEED_TITLE, speed))
    return "\n".join(parts)


def format_block(title: str, values: dict) -> str:
    """``title`` between rules, then ``name : value`` lines as the original printed them (None:
    ``NO_EPISODE``)."""
    lines = [RULE, title, RULE]
    for name, value in values.items():
        if value is None:
            text = NO_EPISODE
        else:
            text = f"{value:10.5f}" if isinstance(value, float) else f"{value:>10}"
        lines.append(f"{name:40}: {text}")
    return "\n".join(lines)


def banner(run) -> str:
    """The start-of-run lines: game, device, sizes, policies, output folder and resume point
    (``run``: the Fabric ``Trainer``)."""
    tc, config = run.config.trainer, run.config
    policies = ", ".join(
        f"{g.tag} ({config.policy[g.tag].algorithm}, {g.num_agents} agent(s) per env)"
        for g in run.groups
    )
    start = (
        f"resuming {run.resumed_from} at iteration {run.iteration}"
        if run.resumed_from is not None
        else "new run"
    )
    ranks = f" x {run.world_size} processes" if run.world_size > 1 else ""
    return "\n".join(
        (
            f"gpu-envs train: {config.name} on {run.device}{ranks}: {run.num_envs} envs x "
            f"{tc.num_steps} steps = {run.num_envs * tc.num_steps} env steps per iteration"
            f"{' per process' if ranks else ''}, {run.num_iterations} iterations "
            f"({run.num_iterations * run.steps_per_iteration:,} env steps)",
            f"  policies: {policies}",
            f"  output: {run.root}",
            f"  {start}; Ctrl-C saves a checkpoint and stops",
        )
    )


def compact_line(records: list[IterationRecord], tags: list[str], speed: dict) -> str:
    """One line per policy for a log window: episodes, losses, entropy, KL and speed."""
    last = records[-1]
    head = f"[iter {speed['Iteration']}, step {last.env_step:,}]"
    lines = []
    for tag in tags:
        episodes = episode_summary(records, tag)
        stats = last.policies[tag]
        if episodes["episode_count"]:
            returns = (
                f"return {episodes['reward_mean']:.2f} ± {episodes['reward_std']:.2f} "
                f"({int(episodes['episode_count'])} episodes)"
            )
        else:
            returns = "no episode ended"
        lines.append(
            f"{head} {tag}: {returns}, value loss {stats['value_loss']:.4g}, "
            f"policy loss {stats['policy_loss']:.4g}, entropy {stats['entropy']:.4g}, "
            f"KL {stats['approx_kl']:.3g}, lr {stats['cur_lr']:.3g}"
        )
    lines[-1] += f" | {speed['Mean env-steps per sec (total)']:,.0f} SPS"
    return "\n".join(lines)


#: Set to 1 to hear every rank of a multi-process run (``gpu-envs train --all-ranks`` sets it).
ALL_RANKS = "GPU_ENVS_ALL_RANKS"
#: The loggers on which every rank says the same (ours, and Lightning's per-rank start-up line).
RANK_LOGGERS = ("gpu_envs.compile", "lightning.fabric.utilities.distributed")


def process_rank() -> tuple[int, int]:
    """``(rank, processes)`` of this process: torch.distributed's once initialised, else what the
    launcher set (torchrun's ``RANK``/``WORLD_SIZE``, SLURM's, Fabric's ``NODE_RANK`` and
    ``LOCAL_RANK``); ``(0, 1)`` in a process alone."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    env = os.environ
    world = int(env.get("WORLD_SIZE") or env.get("SLURM_NTASKS") or 1)
    for name in ("RANK", "SLURM_PROCID"):
        if env.get(name, "").isdigit():
            return int(env[name]), world
    local, node = int(env.get("LOCAL_RANK") or 0), int(env.get("NODE_RANK") or 0)
    return node * int(env.get("LOCAL_WORLD_SIZE") or 1) + local, world


class RankFilter(logging.Filter):
    """In a multi-process run: drops the records below WARNING of ranks other than 0 (unless
    ``all_ranks``), and leads the records of other ranks it keeps (all of them with ``all_ranks``)
    with ``[rank N]``."""

    def __init__(self, all_ranks: bool):
        super().__init__()
        self.all_ranks = all_ranks

    def filter(self, record: logging.LogRecord) -> bool:
        rank, world = process_rank()
        if world == 1:
            return True
        if rank != 0 and record.levelno < logging.WARNING and not self.all_ranks:
            return False
        if (rank != 0 or self.all_ranks) and not str(record.msg).startswith("[rank "):
            record.msg = f"[rank {rank}] {record.msg}"
        return True


def all_ranks_asked() -> bool:
    """Whether ``GPU_ENVS_ALL_RANKS`` asks to hear every rank."""
    return os.environ.get(ALL_RANKS, "") not in ("", "0")


def hear_ranks(all_ranks: bool | None = None) -> None:
    """Rank 0 speaks for all (``RankFilter`` on ``RANK_LOGGERS``); ``all_ranks`` (None:
    ``all_ranks_asked()``) hears every rank. A later call replaces the choice."""
    if all_ranks is None:
        all_ranks = all_ranks_asked()
    for name in RANK_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, RankFilter)]:
            logger.removeFilter(old)
        logger.addFilter(RankFilter(all_ranks))


#: Third-party log lines that are noise to a gpu-envs user: (logger, start of the message).
NOISE_LINES = (
    ("lightning.pytorch.utilities.rank_zero", "💡 Tip:"),  # install litlogger / litmodels
    ("lightning.fabric.utilities.rank_zero", "💡 Tip:"),
    # DDP's forward holds a profiler range, which torch.compile leaves out (once per rank)
    ("torch._dynamo.variables.ctx_manager", "Profiler record function"),
)
#: Deprecation warnings that Lightning's code raises from torch's APIs, by message.
NOISE_WARNINGS = (
    r"torch\.distributed\.nn\.functional\.all_gather is deprecated",  # Fabric's all_gather
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # Lightning's loops (pytree)
)


class _Drop(logging.Filter):
    """Drops the records whose message starts with ``start``."""

    def __init__(self, start: str):
        super().__init__()
        self.start = start

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.start)


def hush_third_party() -> None:
    """Silence ``NOISE_LINES`` (a filter on their loggers) and ``NOISE_WARNINGS`` (raised from
    Lightning's modules); every other line and warning stays. What ``gpu-envs train`` and
    ``TagLightningModule`` do; idempotent."""
    for name, start in NOISE_LINES:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Drop) and f.start == start for f in logger.filters):
            logger.addFilter(_Drop(start))
    for message in NOISE_WARNINGS:
        warnings.filterwarnings("ignore", message=message, module=r"lightning\.")


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Progress on the console: a rich progress bar over the iterations when stdout is a
    terminal, else one plain line every ``seconds`` (iteration, env steps, SPS, return, ETA), so
    a log file or a cluster job shows the run moving. Printing goes through it."""

    def __init__(
        self, total: int, completed: int, enabled: bool, seconds: float = 30.0, env_step: int = 0
    ):
        """``total`` iterations, ``completed`` of them (at ``env_step``) before this one."""
        self._progress = None
        self._enabled, self._seconds = enabled, seconds
        self._total, self._first = total, completed
        self._start = self._last_line = time.monotonic()
        self._last_step = env_step
        if enabled and sys.stdout.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TimeRemainingColumn,
            )
            from rich.progress import (
                Progress as RichProgress,
            )

            self._progress = RichProgress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                "{task.fields[status]}",
            )
            self._task = self._progress.add_task(
                "training", total=total, completed=completed, status=""
            )
            self._progress.start()

    def advance(self, iteration: int, env_step: int, returns: dict[str, float]) -> None:
        """Iteration ``iteration`` ended at ``env_step`` (``returns``: each policy's latest mean
        episode return)."""
        now = time.monotonic()
        due = now - self._last_line >= (
            min(self._seconds, 2.0) if self._progress else self._seconds
        )
        if self._progress is not None:
            self._progress.advance(self._task)
        if not self._enabled or not (due or iteration == self._total):
            return
        sps = (env_step - self._last_step) / max(now - self._last_line, 1e-9)
        done = iteration - self._first
        eta = (now - self._start) / max(done, 1) * (self._total - iteration)
        shown = ", ".join(f"{tag} {value:.2f}" for tag, value in returns.items()) or "-"
        self._last_line, self._last_step = now, env_step
        if self._progress is not None:
            self._progress.update(self._task, status=f"{sps:,.0f} SPS | return {shown}")
        else:
            print(
                f"[progress] iteration {iteration}/{self._total} | env steps {env_step:,} | "
                f"{sps:,.0f} SPS | return {shown} | ETA {_duration(eta)}",
                flush=True,
            )

    def print(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
