"""Per-iteration statistics kept on the device and read back once per logging window.

Each iteration adds, per policy and by name, its learner statistics
(``runs.metrics.LEARNER_METRICS``), the std of each action index over agents/envs/time and its
episode sums (``Collector.episode_stats``). At log time ``MetricsWindow.flush`` stacks the window,
reduces it over the ranks (every rank calls it at the same iterations: the collectives match) and
converts it to Python numbers in one transfer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gpu_envs.runs.metrics import (
    LEARNER_METRICS,
    MAX_METRICS,
    MIN_METRICS,
    SUM_METRICS,
    IterationRecord,
)
from gpu_envs.trainers.rollout import Collector

_ACTION_AXES = ("agents", "envs", "time")


class MetricsWindow:
    """Device-side buffer of per-iteration statistics between two log points."""

    def __init__(self, tags: list[str], heads: int):
        self.tags = list(tags)
        self.action_names = [
            f"action_{h}_std_{axis}" for h in range(heads) for axis in _ACTION_AXES
        ]
        #: How each statistic is reduced over the ranks, by name (its order is the columns').
        self.reductions = {
            **dict.fromkeys(LEARNER_METRICS, "mean"),
            **dict.fromkeys(self.action_names, "mean"),
            **dict.fromkeys(SUM_METRICS, "sum"),
            **dict.fromkeys(MAX_METRICS, "max"),
            **dict.fromkeys(MIN_METRICS, "min"),
        }
        self.names = list(self.reductions)
        self._rows: list[torch.Tensor] = []
        self._meta: list[tuple[int, int]] = []

    def add(
        self, iteration: int, env_step: int, learner: dict[str, dict], collector: Collector
    ) -> None:
        """Append one iteration: the policies' ``learner`` statistics and the action spread and
        episodes of ``collector``'s last rollout (device tensors; nothing is read back here)."""
        columns = []
        for group in collector.groups:
            spread = collector.action_std(group).reshape(-1).unbind()
            statistics = {
                **learner[group.tag],
                **dict(zip(self.action_names, spread)),
                **collector.episode_stats(group),
            }
            columns += [statistics[name] for name in self.names]
        self._rows.append(torch.stack(columns).double())
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
            kinds = [self.reductions[name] for name in self.names] * len(self.tags)
            table = _reduce_columns(table, kinds, all_reduce)
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
