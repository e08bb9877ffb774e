"""Console output: the start banner, a compact line per policy or the original framework's
blocks, and the progress (a bar on a terminal, plain lines otherwise).

``policy_block`` (and ``timing.SpeedMeter.block``) return the ``name : value`` lines
(40-character names) that the original printed every ``metrics_log_freq`` iterations
(``saving.console: blocks``); the same dicts go to results.json. ``compact_line`` is the default
console form of the same window.
"""

from __future__ import annotations

import math
import sys
import time
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
