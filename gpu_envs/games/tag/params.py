"""The parameters of Tag (docs/spec-tag.md, Parameters), validated once at construction.

The kernels compute in float32 (``tag_logic.make_consts``), so every float parameter is checked in
float32: it must be finite there, and the products the kernel forms from it must neither overflow
to inf nor underflow to 0 (docs/input-validation.md lists the rules and why each one exists).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gpu_envs.engine.validation import MAX_SEED, is_int
from gpu_envs.kernels import tag_logic as logic

RESET_MODES = ("random", "fixed")

_F32 = np.float32
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: The smallest normal float32: below it products lose precision and soon round to 0.
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
#: The step counter ``t`` is int32.
MAX_EPISODE_LENGTH = 2**31 - 1
#: The action tables are built level by level on the host, so their size bounds the set-up time.
MAX_ACTION_LEVELS = 10**6
#: A configuration whose one step is estimated to take longer than this on one CPU core is refused.
MAX_STEP_SECONDS = 60.0
#: Seconds per (agent, agent) pair of one game's step on one CPU core, keyed by
#: use_full_observation: an upper bound of the cost measured in docs/input-validation.md.
PAIR_SECONDS = {False: 2.5e-9, True: 14e-9}


def is_real(value) -> bool:
    """A finite int or float (not a bool); huge Python ints count as not finite."""
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(
        value, (bool, np.bool_)
    ):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def in_float32(value: float) -> bool:
    """Whether ``value`` is finite as a float32 and does not round to 0 unless it is 0."""
    with np.errstate(over="ignore", under="ignore"):
        single = _F32(value)
    return bool(np.isfinite(single)) and (value == 0 or single != 0)


def _f32(operation: Callable[..., np.float32], *values: float) -> float:
    """``operation`` on the float32 roundings of ``values``, as the kernel computes it."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        return float(operation(*(_F32(v) for v in values)))


def grid_length_range(num_other_agents_observed: int) -> tuple[float, float]:
    """The float32 ``[low, high]`` that ``grid_length`` L must lie in.

    Partial observation's neighbour search (``tag_logic.nearest_in_game``) starts from the
    squared-distance bound ``float32(k + k // 2) * L*L / candidates`` and multiplies it by 4 until
    k candidates are below it (at most 4 * 2 * L*L). In float32, ``L*L`` must be a normal number
    (else the bound is 0 and the x4 loop never ends) and ``L*L * max(8, k + k//2)`` finite (else
    the bound is inf and the halving loop never ends), with k = num_other_agents_observed.
    """
    factor = _F32(max(8, num_other_agents_observed + num_other_agents_observed // 2))
    with np.errstate(over="ignore", under="ignore"):
        low = _F32(math.sqrt(FLOAT32_TINY))
        while low * low < FLOAT32_TINY:
            low = np.nextafter(low, _F32(np.inf))
        high = _F32(math.sqrt(FLOAT32_MAX / float(factor)))
        while not np.isfinite(high * high * factor):
            high = np.nextafter(high, _F32(0))
        while np.isfinite(np.nextafter(high, _F32(np.inf)) ** 2 * factor):
            high = np.nextafter(high, _F32(np.inf))
    return float(low), float(high)


def _check_int(name: str, value, low: int, high: int | None = None) -> int:
    if not is_int(value) or value < low or (high is not None and value > high):
        allowed = f"an int >= {low}" if high is None else f"an int in [{low}, {high}]"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return int(value)


def _check_real(name: str, value, rule: str, ok: Callable[[float], bool]) -> float:
    if not is_real(value) or not ok(float(value)):
        raise ValueError(f"{name} must be a finite number {rule}, got {value!r}")
    if not in_float32(float(value)):
        raise ValueError(
            f"{name} must be representable in float32 (the kernels' precision): |{name}| <= "
            f"{FLOAT32_MAX:.8g} and not so small that it rounds to 0, got {value!r}"
        )
    return float(value)


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _check_sequence(
    name: str, value, length: int, high: float, high_text: str
) -> tuple[float, ...] | None:
    if value is None:
        return None
    values = (
        np.asarray(value, dtype=object).reshape(-1)
        if not isinstance(value, torch.Tensor)
        else value.detach().cpu().numpy().reshape(-1)
    )
    if len(values) != length:
        raise ValueError(
            f"{name} must be None or a sequence of N={length} numbers, got {len(values)}"
        )
    for i, v in enumerate(values):
        if not is_real(v) or not 0.0 <= float(v) <= high:
            raise ValueError(f"{name}[{i}] must be a finite number in [0, {high_text}], got {v!r}")
    return tuple(float(v) for v in values)


def _require_finite32(value: float, what: str, why: str) -> None:
    if not math.isfinite(value):
        raise ValueError(
            f"{what} is {value} in float32 (the kernels' precision): {why}; keep it within "
            f"+-{FLOAT32_MAX:.8g}"
        )


def _check_float32_products(p: TagParams) -> None:
    """The products and sums the kernel forms from the parameters stay finite (and nonzero) in
    float32."""
    low, high = grid_length_range(p.num_other_agents_observed)
    if not low <= float(_F32(p.grid_length)) <= high:
        raise ValueError(
            f"grid_length must lie in [{low:.8g}, {high:.8g}] for "
            f"num_other_agents_observed={p.num_other_agents_observed}, got {p.grid_length!r}: in "
            "float32, L*L must be a normal number and L*L*max(8, 1.5*num_other_agents_observed) "
            "finite, or the neighbour search never ends"
        )
    for team in ("tagger", "runner"):
        skill = getattr(p, f"skill_level_{team}")
        cap = _f32(lambda c: c, p.max_speed * skill)
        ratio = _f32(lambda c, n: (c + c) / n, cap, p.max_speed + 1e-10)
        own = _f32(lambda c, m: c / m, cap, p.max_speed)
        if not (cap >= FLOAT32_TINY and math.isfinite(ratio) and math.isfinite(own)):
            raise ValueError(
                f"max_speed * skill_level_{team} = {p.max_speed * skill!r} (a {team}'s top speed) "
                f"must be at least {FLOAT32_TINY:.8g} and 2 * it / (max_speed + 1e-10) finite in "
                "float32, or speeds and their observations become 0 or inf; got "
                f"max_speed={p.max_speed!r}, skill_level_{team}={skill!r}"
            )
    for quantity in ("acceleration", "turn"):
        span = _f32(
            lambda hi, lo: hi - lo, getattr(p, f"max_{quantity}"), getattr(p, f"min_{quantity}")
        )
        _require_finite32(
            span, f"max_{quantity} - min_{quantity}", "the action levels would be inf or NaN"
        )
    _require_finite32(
        _f32(lambda a, b: a + b, p.edge_hit_penalty, p.step_penalty_for_tagger),
        "edge_hit_penalty + step_penalty_for_tagger",
        "a tagger's reward would overflow",
    )
    _require_finite32(
        _f32(lambda n, r: n * r, p.num_runners, p.tag_reward_for_tagger),
        "num_runners * tag_reward_for_tagger",
        "a tagger's reward for tagging every runner would overflow",
    )
    _require_finite32(
        _f32(lambda a, b: a + b, p.edge_hit_penalty, p.tag_penalty_for_runner),
        "edge_hit_penalty + tag_penalty_for_runner",
        "a runner's reward would overflow",
    )
    _require_finite32(
        _f32(lambda a, b: a + b, p.step_reward_for_runner, p.end_of_game_reward_for_runner),
        "step_reward_for_runner + end_of_game_reward_for_runner",
        "a runner's reward would overflow",
    )
    if (
        p.tagging_distance > 0
        and _f32(lambda d, length: d * length, p.tagging_distance, p.grid_length) == 0
    ):
        raise ValueError(
            f"tagging_distance * grid_length = {p.tagging_distance * p.grid_length!r} rounds to 0 "
            "in float32, so no runner could ever be tagged; use tagging_distance=0 to mean that, "
            "or a larger value"
        )


def estimate_step_seconds(params: TagParams, num_envs: int = 1) -> float:
    """Estimated seconds of one step of ``num_envs`` games on one CPU core: ``E * N**2 *
    PAIR_SECONDS``."""
    return num_envs * params.num_agents**2 * PAIR_SECONDS[params.use_full_observation]


def check_step_cost(params: TagParams, num_envs: int = 1) -> None:
    """Refuse a configuration whose one step would take longer than ``MAX_STEP_SECONDS`` on one CPU
    core."""
    seconds = estimate_step_seconds(params, num_envs)
    if seconds > MAX_STEP_SECONDS:
        mode = "full" if params.use_full_observation else "partial"
        raise ValueError(
            f"num_envs={num_envs} games of N = num_taggers + num_runners = {params.num_agents} "
            f"agents ({mode} observation, use_full_observation={params.use_full_observation}): one "
            f"step costs O(num_envs * N**2), about {seconds:.3g} s on one CPU core at "
            f"{PAIR_SECONDS[params.use_full_observation]:.3g} s per agent pair, over the "
            f"{MAX_STEP_SECONDS:.0f} s limit; use fewer agents or games"
        )


@dataclasses.dataclass(frozen=True)
class TagParams:
    """The Tag parameters of docs/spec-tag.md, validated at construction (``ValueError`` naming the
    rule)."""

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
        checked: dict[str, Any] = {
            "num_taggers": _check_int("num_taggers", self.num_taggers, 1),
            "num_runners": _check_int("num_runners", self.num_runners, 1),
            "grid_length": _check_real("grid_length", self.grid_length, "> 0", lambda v: v > 0),
            "episode_length": _check_int(
                "episode_length", self.episode_length, 1, MAX_EPISODE_LENGTH
            ),
            "max_speed": _check_real("max_speed", self.max_speed, "> 0", lambda v: v > 0),
            "num_acceleration_levels": _check_int(
                "num_acceleration_levels", self.num_acceleration_levels, 0, MAX_ACTION_LEVELS
            ),
            "num_turn_levels": _check_int(
                "num_turn_levels", self.num_turn_levels, 0, MAX_ACTION_LEVELS
            ),
        }
        n = checked["num_taggers"] + checked["num_runners"]
        for name in ("skill_level_tagger", "skill_level_runner"):
            checked[name] = _check_real(name, getattr(self, name), "> 0", lambda v: v > 0)
        for quantity in ("acceleration", "turn"):
            low_name, high_name = f"min_{quantity}", f"max_{quantity}"
            low = _check_real(low_name, getattr(self, low_name), "", lambda v: True)
            high = _check_real(high_name, getattr(self, high_name), "", lambda v: True)
            if low > high:
                raise ValueError(
                    f"{low_name} must be <= {high_name}, got {low_name}={low}, {high_name}={high}"
                )
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
            "num_other_agents_observed", self.num_other_agents_observed, 1, n
        )
        length = checked["grid_length"]
        for name in ("starting_location_x", "starting_location_y"):
            checked[name] = _check_sequence(
                name, getattr(self, name), n, length, f"grid_length={length}"
            )
        checked["starting_directions"] = _check_sequence(
            "starting_directions", self.starting_directions, n, float(logic.TWO_PI_32), "2pi"
        )
        if self.seed is not None:
            checked["seed"] = _check_int("seed", self.seed, 0, MAX_SEED)
        if self.reset_mode not in RESET_MODES:
            raise ValueError(f"reset_mode must be one of {RESET_MODES}, got {self.reset_mode!r}")
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        _check_float32_products(self)
        check_step_cost(self, 1)

    @property
    def num_agents(self) -> int:
        """N = num_taggers + num_runners."""
        return self.num_taggers + self.num_runners
