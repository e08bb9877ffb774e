"""Console output in the original framework's format: a block per policy, a speed block, a
progress bar.

``policy_block`` and ``speed_block`` return the ``name : value`` lines (40-character names) that
the original printed every ``metrics_log_freq`` iterations; the same dicts go to results.json.
``SpeedWindow`` gathers the speed block's inputs over the iterations between two prints.
"""

from __future__ import annotations

import math
import sys
import time

from gpu_envs.trainers.metrics import IterationRecord, episode_summary
from gpu_envs.trainers.rollout import PolicyGroup
from gpu_envs.trainers.timing import PHASES

RULE = "=" * 40
#: What the console prints for an episode statistic of a window in which no episode ended (the
#: block holds None there: results.json writes null).
NO_EPISODE = "no episode ended in this window"


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


def speed_block(
    iteration: int,
    num_iterations: int,
    iterations: int,
    phase_ms: dict[str, float],
    total_ms: float,
    env_steps: int,
    agent_steps: int,
) -> dict:
    """Mean ms per iteration of each phase and env-/agent-steps per second over the last
    ``iterations`` iterations (``env_steps``/``agent_steps`` taken in them, ``total_ms`` spent)."""
    seconds = total_ms / 1000.0
    return {
        "Iteration": f"{iteration} / {num_iterations}",
        "Mean policy eval time per iter (ms)": phase_ms["policy_eval"] / max(iterations, 1),
        "Mean action sample time per iter (ms)": phase_ms["action_sampling"] / max(iterations, 1),
        "Mean env. step time per iter (ms)": phase_ms["env_step"] / max(iterations, 1),
        "Mean training time per iter (ms)": phase_ms["training"] / max(iterations, 1),
        "Mean total time per iter (ms)": total_ms / max(iterations, 1),
        "Mean env-steps per sec (total)": env_steps / seconds if seconds else float("nan"),
        "Mean agent-steps per sec (total)": agent_steps / seconds if seconds else float("nan"),
    }


def format_blocks(blocks: dict[str, dict], speed: dict) -> str:
    """Every policy's block (``blocks``: tag -> ``policy_block``), then the speed block."""
    parts = [format_block(f"Metrics for policy '{tag}'", block) for tag, block in blocks.items()]
    return "\n".join([*parts, format_block("Speed performance stats", speed)])


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


class SpeedWindow:
    """The speed block's inputs over the iterations since the last ``block()``: their phase times,
    their agent steps and the wall time from the start of the first (``begin()``)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._start: float | None = None
        self._iterations = 0
        self._agent_steps = 0.0
        self._phase_ms = dict.fromkeys(PHASES, 0.0)

    def begin(self) -> None:
        """An iteration starts: the window's clock starts with its first."""
        if self._start is None:
            self._start = time.perf_counter()

    def add(self, phase_ms: dict[str, float], agent_steps: float) -> None:
        """An iteration ended, having spent ``phase_ms`` and taken ``agent_steps``."""
        for name, ms in phase_ms.items():
            self._phase_ms[name] += ms
        self._iterations += 1
        self._agent_steps += agent_steps

    def collect_seconds(self) -> float:
        """Seconds the window's iterations spent collecting (every phase but training)."""
        return sum(ms for name, ms in self._phase_ms.items() if name != "training") / 1000.0

    def block(self, iteration: int, num_iterations: int, steps_per_iteration: int) -> dict:
        """``speed_block`` of the window (``steps_per_iteration`` env steps each); a new window
        starts."""
        total_ms = 1000.0 * (time.perf_counter() - (self._start or time.perf_counter()))
        speed = speed_block(
            iteration,
            num_iterations,
            self._iterations,
            self._phase_ms,
            total_ms,
            steps_per_iteration * self._iterations,
            int(self._agent_steps),
        )
        self._reset()
        return speed


class Progress:
    """A rich progress bar over the iterations when stdout is a terminal; printing goes through
    it."""

    def __init__(self, total: int, completed: int, enabled: bool):
        self._progress = None
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
            )
            self._task = self._progress.add_task("training", total=total, completed=completed)
            self._progress.start()

    def advance(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def print(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
