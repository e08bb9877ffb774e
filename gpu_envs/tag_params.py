"""The parameters of Tag (SPEC-tag.md), validated once at construction."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np
import torch

from gpu_envs.kernels import tag_logic as logic

RESET_MODES = ("random", "fixed")


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value) -> bool:
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_)) and math.isfinite(value))


def _check_int(name: str, value, low: int, high: int | None = None) -> int:
    if not is_int(value) or value < low or (high is not None and value > high):
        allowed = f"an int >= {low}" if high is None else f"an int in [{low}, {high}]"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return int(value)


def _check_real(name: str, value, rule: str, ok: Callable[[float], bool]) -> float:
    if not is_real(value) or not ok(float(value)):
        raise ValueError(f"{name} must be a finite number {rule}, got {value!r}")
    return float(value)


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _check_sequence(name: str, value, length: int, high: float, high_text: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    values = np.asarray(value, dtype=object).reshape(-1) if not isinstance(value, torch.Tensor) \
        else value.detach().cpu().numpy().reshape(-1)
    if len(values) != length:
        raise ValueError(f"{name} must be None or a sequence of N={length} numbers, got {len(values)}")
    for i, v in enumerate(values):
        if not is_real(v) or not 0.0 <= float(v) <= high:
            raise ValueError(f"{name}[{i}] must be a finite number in [0, {high_text}], got {v!r}")
    return tuple(float(v) for v in values)


@dataclasses.dataclass(frozen=True)
class TagParams:
    """The SPEC-tag.md parameters, validated at construction (``ValueError`` naming the rule)."""

    num_taggers: int = 1
    num_runners: int = 10
    grid_length: float = 10.0
    episode_length: int = 100
    max_speed: float = 1.0
    skill_level_tagger: float = 1.0
    skill_level_runner: float = 1.0
    max_acceleration: float = 1.0
    min_acceleration: float = -1.0
    max_turn: float = math.pi / 2
    min_turn: float = -math.pi / 2
    num_acceleration_levels: int = 10
    num_turn_levels: int = 10
    edge_hit_penalty: float = 0.0
    use_full_observation: bool = True
    num_other_agents_observed: int = 2
    tagging_distance: float = 0.01
    tag_reward_for_tagger: float = 1.0
    step_penalty_for_tagger: float = 0.0
    tag_penalty_for_runner: float = -1.0
    step_reward_for_runner: float = 0.0
    end_of_game_reward_for_runner: float = 1.0
    runner_exits_game_after_tagged: bool = True
    starting_location_x: tuple[float, ...] | None = None
    starting_location_y: tuple[float, ...] | None = None
    starting_directions: tuple[float, ...] | None = None
    seed: int | None = None
    reset_mode: str = "random"
    observe_self: bool = False

    def __post_init__(self):
        checked = {
            "num_taggers": _check_int("num_taggers", self.num_taggers, 1),
            "num_runners": _check_int("num_runners", self.num_runners, 1),
            "grid_length": _check_real("grid_length", self.grid_length, "> 0", lambda v: v > 0),
            "episode_length": _check_int("episode_length", self.episode_length, 1),
            "max_speed": _check_real("max_speed", self.max_speed, "> 0", lambda v: v > 0),
            "num_acceleration_levels": _check_int("num_acceleration_levels", self.num_acceleration_levels, 0),
            "num_turn_levels": _check_int("num_turn_levels", self.num_turn_levels, 0),
        }
        n = checked["num_taggers"] + checked["num_runners"]
        for name in ("skill_level_tagger", "skill_level_runner"):
            checked[name] = _check_real(name, getattr(self, name), "> 0", lambda v: v > 0)
        for quantity in ("acceleration", "turn"):
            low_name, high_name = f"min_{quantity}", f"max_{quantity}"
            low = _check_real(low_name, getattr(self, low_name), "", lambda v: True)
            high = _check_real(high_name, getattr(self, high_name), "", lambda v: True)
            if low > high:
                raise ValueError(f"{low_name} must be <= {high_name}, got {low_name}={low}, {high_name}={high}")
            checked[low_name], checked[high_name] = low, high
        for name, rule, ok in (
            ("edge_hit_penalty", "<= 0", lambda v: v <= 0),
            ("tagging_distance", "in [0, 1] (a fraction of grid_length)", lambda v: 0 <= v <= 1),
            ("tag_reward_for_tagger", ">= 0", lambda v: v >= 0),
            ("step_penalty_for_tagger", "<= 0", lambda v: v <= 0),
            ("tag_penalty_for_runner", "<= 0", lambda v: v <= 0),
            ("step_reward_for_runner", ">= 0", lambda v: v >= 0),
            ("end_of_game_reward_for_runner", ">= 0", lambda v: v >= 0),
        ):
            checked[name] = _check_real(name, getattr(self, name), rule, ok)
        for name in ("use_full_observation", "runner_exits_game_after_tagged", "observe_self"):
            checked[name] = _check_bool(name, getattr(self, name))
        checked["num_other_agents_observed"] = _check_int(
            "num_other_agents_observed", self.num_other_agents_observed, 1, n)
        length = checked["grid_length"]
        for name in ("starting_location_x", "starting_location_y"):
            checked[name] = _check_sequence(name, getattr(self, name), n, length, f"grid_length={length}")
        checked["starting_directions"] = _check_sequence(
            "starting_directions", self.starting_directions, n, float(logic.TWO_PI_32), "2pi")
        if self.seed is not None:
            checked["seed"] = _check_int("seed", self.seed, 0)
        if self.reset_mode not in RESET_MODES:
            raise ValueError(f"reset_mode must be one of {RESET_MODES}, got {self.reset_mode!r}")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @property
    def num_agents(self) -> int:
        """N = num_taggers + num_runners."""
        return self.num_taggers + self.num_runners
