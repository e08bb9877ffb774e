"""Per-iteration statistics kept on the device and read back once per logging window.

Each iteration adds, per policy, its learner statistics (``ppo.LEARNER_METRICS``), the std of
each action index over agents/envs/time and its episode sums (``Collector.episode_stats``). At log
time ``MetricsWindow.flush`` stacks the window, reduces it over the ranks (every rank calls it at
the same iterations: the collectives match) and converts it to Python numbers in one transfer.
``cleanrl_metrics`` names a window's numbers as CleanRL logs them, for ``fabric.log_dict``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from gpu_envs.trainers.ppo import LEARNER_METRICS
from gpu_envs.trainers.rollout import Collector

SUM_METRICS = ("episode_count", "return_sum", "return_sumsq", "length_sum", "agentstep_count")
MAX_METRICS = ("return_max",)
MIN_METRICS = ("return_min",)
_ACTION_AXES = ("agents", "envs", "time")


@dataclass
class IterationRecord:
    """One iteration's numbers per policy (host floats), as read back from the device."""

    iteration: int
    env_step: int
    policies: dict[str, dict[str, float]]


class MetricsWindow:
    """Device-side buffer of per-iteration statistics between two log points."""

    def __init__(self, tags: list[str], heads: int):
        self.tags, self.heads = list(tags), heads
        self.names = list(LEARNER_METRICS) + [
            f"action_{h}_std_{axis}" for h in range(heads) for axis in _ACTION_AXES
        ]
        self.names += list(SUM_METRICS) + list(MAX_METRICS) + list(MIN_METRICS)
        self._kinds = (
            ["mean"] * (len(LEARNER_METRICS) + 3 * heads)
            + ["sum"] * len(SUM_METRICS)
            + ["max"] * len(MAX_METRICS)
            + ["min"] * len(MIN_METRICS)
        )
        self._rows: list[torch.Tensor] = []
        self._meta: list[tuple[int, int]] = []

    def add(
        self, iteration: int, env_step: int, learner: dict[str, dict], collector: Collector
    ) -> None:
        """Append one iteration: the policies' ``learner`` statistics and the action spread and
        episodes of ``collector``'s last rollout (device tensors; nothing is read back here)."""
        parts = []
        for group in collector.groups:
            episodes = collector.episode_stats(group)
            parts.append(torch.stack([learner[group.tag][k].double() for k in LEARNER_METRICS]))
            parts.append(collector.action_std(group).double().reshape(-1))
            parts.append(
                torch.stack([episodes[k].double() for k in SUM_METRICS + MAX_METRICS + MIN_METRICS])
            )
        self._rows.append(torch.cat(parts))
        self._meta.append((iteration, env_step))

    def __len__(self) -> int:
        return len(self._rows)

    def flush(self, all_reduce: Callable | None = None) -> list[IterationRecord]:
        """Reduce the window over the ranks with ``all_reduce`` (``fabric.all_reduce``; None: one
        process), read it back in one transfer, and start a new window."""
        if not self._rows:
            return []
        table = torch.stack(self._rows)  # [W, P * K]
        if all_reduce is not None:
            table = _reduce_columns(table, self._kinds * len(self.tags), all_reduce)
        rows = table.tolist()
        width = len(self.names)
        records = []
        for (iteration, env_step), row in zip(self._meta, rows):
            policies = {
                tag: dict(zip(self.names, row[i * width : (i + 1) * width]))
                for i, tag in enumerate(self.tags)
            }
            records.append(IterationRecord(iteration, env_step, policies))
        self._rows, self._meta = [], []
        return records


def _reduce_columns(table: torch.Tensor, kinds: list[str], all_reduce: Callable) -> torch.Tensor:
    """Each column reduced over the ranks as its kind says: mean, sum, max or min."""
    out = table.clone()
    for kind in ("mean", "sum", "max", "min"):
        columns = torch.tensor([i for i, k in enumerate(kinds) if k == kind], device=table.device)
        out[:, columns] = all_reduce(table[:, columns].contiguous(), reduce_op=kind)
    return out


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def learner_summary(records: list[IterationRecord], tag: str) -> dict[str, float]:
    """LightZero-style ``<metric>_avg`` over the window for policy ``tag``."""
    return {
        f"{name}_avg": _nanmean([r.policies[tag][name] for r in records])
        for name in LEARNER_METRICS
    }


def episode_summary(records: list[IterationRecord], tag: str) -> dict[str, float]:
    """Episode statistics over the window for ``tag``: count, return mean/std/max/min, length and
    agent steps."""
    rows = [r.policies[tag] for r in records]
    count = sum(r["episode_count"] for r in rows)
    total = sum(r["return_sum"] for r in rows)
    mean = total / count if count else float("nan")
    var = sum(r["return_sumsq"] for r in rows) / count - mean**2 if count else float("nan")
    return {
        "episode_count": count,
        "reward_mean": mean,
        "reward_std": math.sqrt(max(var, 0.0)) if count else float("nan"),
        "reward_max": max(r["return_max"] for r in rows) if count else float("nan"),
        "reward_min": min(r["return_min"] for r in rows) if count else float("nan"),
        "avg_envstep_per_episode": sum(r["length_sum"] for r in rows) / count
        if count
        else float("nan"),
        "agentstep_count": sum(r["agentstep_count"] for r in rows),
    }


# CleanRL's names for the learner statistics (``losses/<name>``).
_LOSSES = {
    "value_loss": "value_loss",
    "policy_loss": "policy_loss",
    "entropy": "entropy",
    "approx_kl": "approx_kl",
    "clipfrac": "clip_fraction",
    "explained_variance": "explained_variance",
}


def cleanrl_metrics(records: list[IterationRecord], tags: list[str]) -> dict[str, float]:
    """A window's metrics under CleanRL's names: ``losses/*`` (the window's averages),
    ``charts/learning_rate`` (the last iteration's), ``charts/episodic_return`` and
    ``charts/episodic_length`` (the episodes that ended in the window). The caller adds
    ``charts/SPS``, the env steps per second it measured.

    With several policies each name holds the policy's tag after its group
    (``losses/runner/value_loss``). NaN values (a frozen policy's losses, a window without an
    ended episode) are left out.
    """
    metrics = {}
    for tag in tags:
        prefix = f"{tag}/" if len(tags) > 1 else ""
        averages, episodes = learner_summary(records, tag), episode_summary(records, tag)
        metrics.update(
            {f"losses/{prefix}{name}": averages[f"{key}_avg"] for name, key in _LOSSES.items()}
        )
        metrics[f"charts/{prefix}learning_rate"] = records[-1].policies[tag]["cur_lr"]
        metrics[f"charts/{prefix}episodic_return"] = episodes["reward_mean"]
        metrics[f"charts/{prefix}episodic_length"] = episodes["avg_envstep_per_episode"]
    return {name: value for name, value in metrics.items() if not math.isnan(value)}
