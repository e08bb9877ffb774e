"""A run's per-iteration numbers as records: what each policy reports (``LEARNER_METRICS``, the
episode statistics), one :class:`IterationRecord` per iteration (read back from the device by
``gpu_envs.trainers.statistics.MetricsWindow``), and the window summaries the console, the
LightZero logs and CleanRL's names (``cleanrl_metrics``, for ``fabric.log_dict``) are made of.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: What the learner reports for each policy and iteration (``trainers.ppo.update``).
LEARNER_METRICS = (
    "cur_lr",
    "total_loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "grad_norm",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "first_ratio_deviation",
    "value_mean",
    "advantage_mean",
    "norm_advantage_mean",
    "return_mean",
    "reward_mean",
    "reward_max",
    "reward_min",
)

#: The episodes of a policy against frozen opponents, and of self-play (``opponents.share``).
MATCHUP_METRICS = (
    "vs_frozen_episode_count",
    "vs_frozen_return_sum",
    "selfplay_episode_count",
    "selfplay_return_sum",
)
SUM_METRICS = (
    "episode_count",
    "return_sum",
    "return_sumsq",
    "length_sum",
    "agentstep_count",
    *MATCHUP_METRICS,
)
MAX_METRICS = ("return_max",)
MIN_METRICS = ("return_min",)


@dataclass
class IterationRecord:
    """One iteration's numbers per policy (host floats), as read back from the device."""

    iteration: int
    env_step: int
    policies: dict[str, dict[str, float]]


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
    ``charts/episodic_length`` (the episodes that ended in the window; with frozen opponents also
    ``charts/episodic_return_vs_frozen`` and ``charts/episodic_return_selfplay``, the episodes of
    each kind of game). The caller adds
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
        for kind in ("vs_frozen", "selfplay"):  # (games against frozen opponents: NaN without)
            count = sum(r.policies[tag].get(f"{kind}_episode_count", 0.0) for r in records)
            total = sum(r.policies[tag].get(f"{kind}_return_sum", 0.0) for r in records)
            metrics[f"charts/{prefix}episodic_return_{kind}"] = total / count if count else math.nan
    return {name: value for name, value in metrics.items() if not math.isnan(value)}
