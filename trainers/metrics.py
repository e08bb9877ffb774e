"""Per-iteration statistics kept on the device and read back once per logging window.

Each iteration adds, per policy, its learner statistics (``learner.LEARNER_METRICS``), the std of
each action index over agents/envs/time and its episode sums (``Collector.episode_stats``). At log
time ``MetricsWindow.flush`` stacks the window, reduces it over the ranks (every rank calls it at
the same iterations: the collectives match) and converts it to Python numbers in one transfer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gpu_envs.trainers.learner import LEARNER_METRICS

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
        self,
        iteration: int,
        env_step: int,
        learner: dict[str, dict],
        actions: dict[str, torch.Tensor],
        episodes: dict[str, dict],
    ) -> None:
        """Append one iteration (device tensors; nothing is read back here)."""
        parts = []
        for tag in self.tags:
            parts.append(torch.stack([learner[tag][k].double() for k in LEARNER_METRICS]))
            parts.append(actions[tag].double().reshape(-1))
            parts.append(
                torch.stack(
                    [episodes[tag][k].double() for k in SUM_METRICS + MAX_METRICS + MIN_METRICS]
                )
            )
        self._rows.append(torch.cat(parts))
        self._meta.append((iteration, env_step))

    def __len__(self) -> int:
        return len(self._rows)

    def flush(self, world_size: int) -> list[IterationRecord]:
        """Reduce the window over ranks, read it back, and start a new window."""
        if not self._rows:
            return []
        table = torch.stack(self._rows)  # [W, P * K]
        if world_size > 1:
            table = _reduce_columns(table, self._kinds * len(self.tags), world_size)
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


def _reduce_columns(table: torch.Tensor, kinds: list[str], world_size: int) -> torch.Tensor:
    out = table.clone()
    ops = {
        "mean": dist.ReduceOp.SUM,
        "sum": dist.ReduceOp.SUM,
        "max": dist.ReduceOp.MAX,
        "min": dist.ReduceOp.MIN,
    }
    for kind, op in ops.items():
        cols = torch.tensor([i for i, k in enumerate(kinds) if k == kind], device=table.device)
        part = table[:, cols].contiguous()
        dist.all_reduce(part, op=op)
        out[:, cols] = part / world_size if kind == "mean" else part
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
    """Episode statistics over the window for ``tag``: count, return mean/std/max/min, length, steps."""
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
