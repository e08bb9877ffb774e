"""The shared input checks (gpu_envs.engine.validation) and Tag's float32 parameter rules
(gpu_envs.games.tag.params)."""

import math
import tracemalloc

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs import TagEnv
from gpu_envs.engine import validation
from gpu_envs.games.tag import params as tag_params
from gpu_envs.games.tag.params import TagParams
from gpu_envs.kernels import tag_logic

CPU = torch.device("cpu")
F32_MAX = float(np.finfo(np.float32).max)


# ------------------------------------------------------------------------------ seeds
@pytest.mark.parametrize(
    "seed, num_envs",
    [
        (2**64, 1),
        (2**63, 1),
        (2**63 - 1, 2),
        (-1, 1),
        (1.5, 1),
        (True, 1),
        ("3", 1),
        (np.uint64(2**63), 1),
    ],
)
def test_int_seed_outside_the_int64_range_is_refused(seed, num_envs):
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*63 - "):
        validation.per_env_seeds(seed, num_envs, CPU)


def test_the_largest_int_seed_fills_the_int64_range():
    seeds = validation.per_env_seeds(2**63 - 3, 3, CPU)
    assert seeds.tolist() == [2**63 - 3, 2**63 - 2, 2**63 - 1]


@pytest.mark.parametrize("seeds", [[0, 2**63], [0, -1], [0, 1.5], [0, True], [[0], [1]], [0]])
def test_bad_seed_sequences_are_refused(seeds):
    with pytest.raises(ValueError, match=r"seed sequence must hold 2 ints in \[0, 2\*\*63 - 1\]"):
        validation.per_env_seeds(seeds, 2, CPU)


def test_seed_sequences_of_each_container():
    for seeds in (
        [5, 2**63 - 1],
        (5, 2**63 - 1),
        np.array([5, 2**63 - 1], dtype=np.uint64),
        torch.tensor([5, 2**63 - 1]),
    ):
        assert validation.per_env_seeds(seeds, 2, CPU).tolist() == [5, 2**63 - 1]


# ------------------------------------------------------------------------------ episode steps,
# bounds
@pytest.mark.parametrize(
    "value, expected", [(None, 0), (0, 0), (500, 500), (np.int32(7), 7), (2**31 - 1, 2**31 - 1)]
)
def test_max_episode_steps_accepted(value, expected):
    result = validation.check_max_episode_steps(value)
    assert result == expected and type(result) is int


@pytest.mark.parametrize("value", ["10", 2**64, 2**31, float("nan"), 1.5, 10.0, -1, True, [10]])
def test_max_episode_steps_refused_naming_the_rule(value):
    with pytest.raises(ValueError, match=r"max_episode_steps must be an int in \[0, 2147483647\]"):
        validation.check_max_episode_steps(value)


@pytest.mark.parametrize(
    "low, high", [(-0.05, 0.05), (0, 0), (-(2.0**60), 2.0**60), (np.float32(-1), 1)]
)
def test_reset_bounds_accepted(low, high):
    assert validation.check_reset_bounds(low, high) == (float(low), float(high))


@pytest.mark.parametrize(
    "low, high, message",
    [
        (float("nan"), 0.1, r"options\['low'\] must be a finite number"),
        (-0.1, float("inf"), r"options\['high'\] must be a finite number"),
        (-0.1, 2.0**61, r"options\['high'\].*2\*\*60"),
        (-(10**400), 0.0, r"options\['low'\]"),
        (0.1, -0.1, r"options\['low'\] must be <= options\['high'\]"),
        ("0", 1.0, r"options\['low'\]"),
        (None, 1.0, r"options\['low'\]"),
    ],
)
def test_reset_bounds_refused(low, high, message):
    with pytest.raises(ValueError, match=message):
        validation.check_reset_bounds(low, high)


# ------------------------------------------------------------------------------ masks and tensors
def test_reset_mask_none_is_a_type_error_naming_the_option():
    with pytest.raises(TypeError, match=r"options\['reset_mask'\] must be a bool array.*got None"):
        validation.as_reset_mask(None, 3, CPU)


@pytest.mark.parametrize(
    "factory",
    [
        lambda: torch.ones(3, dtype=torch.bool, device="meta"),
        lambda: torch.ones(3, dtype=torch.bool).to_sparse(),
    ],
)
def test_tensors_on_unsupported_devices_or_layouts_are_refused(factory):
    with pytest.raises(
        ValueError, match=r"options\['reset_mask'\] must be a dense tensor on the CPU or a CUDA"
    ):
        validation.as_reset_mask(factory(), 3, CPU)
    with pytest.raises(ValueError, match="actions must be a dense tensor"):
        validation.as_action_tensor(factory().long(), (3,), CPU, 1)


def test_as_tensor_refuses_non_numeric_values():
    for value in (None, "abc", [object()], {"a": 1}):
        with pytest.raises(TypeError, match="thing must be numbers"):
            validation.as_tensor(value, "thing", "numbers")


# ------------------------------------------------------------------------------ integer actions
@pytest.mark.parametrize(
    "actions, error, message",
    [
        (
            torch.zeros(3, dtype=torch.int64),
            ValueError,
            r"actions must have shape \(4,\), got \(3,\)",
        ),
        (torch.zeros(4, dtype=torch.float32), TypeError, "integer dtype"),
        (np.array([0.0, np.nan, 0, 0]), TypeError, "NaN"),
        (torch.zeros(4, dtype=torch.int64, device="meta"), ValueError, "dense tensor on the CPU"),
        (None, TypeError, "integer array"),
    ],
)
def test_action_layout_is_checked_with_and_without_the_range(actions, error, message):
    for check in (
        lambda a: validation.check_action_layout(a, (4,), CPU),
        lambda a: validation.as_action_tensor(a, (4,), CPU, 1, check_range=False),
        lambda a: validation.as_action_tensor(a, (4,), CPU, 1),
    ):
        with pytest.raises(error, match=message):
            check(actions)


def test_action_layout_does_not_check_values_and_converts_to_int64():
    result = validation.check_action_layout(np.array([0, 7, -3], dtype=np.int8), (3,), CPU)
    assert result.dtype == torch.int64 and result.tolist() == [0, 7, -3]
    same = torch.tensor([1, 0, 1])
    assert validation.check_action_layout(same, (3,), CPU) is same


@given(st.lists(st.integers(-3, 4), min_size=6, max_size=6))
@settings(max_examples=40, deadline=None)
def test_action_range_matches_a_reference(values):
    actions = torch.tensor(values).reshape(3, 2)
    upper = [1, 3]
    inside = all(0 <= v <= upper[i % 2] for i, v in enumerate(values))
    if inside:
        assert torch.equal(validation.as_action_tensor(actions, (3, 2), CPU, upper), actions)
    else:
        with pytest.raises(
            ValueError, match=r"actions\[\d, \d\] = -?\d is out of range: allowed 0..\[1, 3\]"
        ):
            validation.as_action_tensor(actions, (3, 2), CPU, upper)


# ------------------------------------------------------------------------------ continuous actions
def test_box_actions_accepted_and_converted():
    actions = np.array([[-2.0], [0.5], [2.0]])
    result = validation.as_box_action_tensor(actions, (3, 1), CPU)
    assert result.dtype == torch.float32 and result.flatten().tolist() == [-2.0, 0.5, 2.0]
    as64 = validation.as_box_action_tensor(actions, (3, 1), CPU, dtype=torch.float64)
    assert as64.dtype == torch.float64


@pytest.mark.parametrize(
    "actions, error, message",
    [
        (np.array([[0.0], [np.nan], [0.0]]), ValueError, r"actions\[1, 0\] = nan must be finite"),
        (np.array([[0.0], [0.0], [-np.inf]]), ValueError, r"actions\[2, 0\] = -inf must be finite"),
        (np.zeros((3, 1), dtype=np.int64), TypeError, "floating dtype"),
        (np.zeros((3,)), ValueError, r"shape \(3, 1\)"),
        (torch.zeros((3, 1), device="meta"), ValueError, "dense tensor"),
        ("left", TypeError, "float array"),
    ],
)
def test_box_actions_refused(actions, error, message):
    with pytest.raises(error, match=message):
        validation.as_box_action_tensor(actions, (3, 1), CPU)


def test_box_actions_out_of_the_space_pass_for_the_step_to_clip():
    actions = np.array([[2.5], [-1e300], [0.5]])
    passed = validation.as_box_action_tensor(actions, (3, 1), CPU, dtype=torch.float64)
    assert torch.equal(passed, torch.from_numpy(actions))


def test_box_action_layout_skips_the_values_only():
    out = validation.check_box_action_layout(np.array([[7.0]]), (1, 1), CPU)
    assert out.dtype == torch.float32 and float(out) == 7.0
    with pytest.raises(TypeError, match="floating dtype"):
        validation.check_box_action_layout(np.array([[1]]), (1, 1), CPU)


# ------------------------------------------------------------------------------ Tag parameters in
# float32
def test_grid_length_range_is_exact_in_float32():
    for k in (1, 2, 10, 1000):
        low, high = tag_params.grid_length_range(k)
        factor = np.float32(max(8, k + k // 2))
        f32 = np.float32
        with np.errstate(over="ignore", under="ignore"):
            assert f32(low) * f32(low) >= np.finfo(np.float32).tiny
            assert f32(np.nextafter(f32(low), f32(0))) ** 2 < np.finfo(np.float32).tiny
            assert np.isfinite(f32(high) * f32(high) * factor)
            assert not np.isfinite(np.nextafter(f32(high), f32(np.inf)) ** 2 * factor)
    assert tag_params.grid_length_range(2) == pytest.approx((1.0842022e-19, 6.521909e18), rel=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(grid_length=1e-30), r"grid_length must lie in \[1.0842022e-19, 6.5219088e\+18\]"),
        (dict(grid_length=2e19), r"grid_length must lie in \[1.0842022e-19, 6.5219088e\+18\]"),
        (dict(grid_length=1e39), "grid_length must be representable in float32"),
        (
            dict(
                grid_length=5e18,
                num_other_agents_observed=10,
                use_full_observation=False,
                num_runners=20,
            ),
            r"grid_length must lie in \[1.0842022e-19, 4.7\d+e\+18\] for "
            r"num_other_agents_observed=10",
        ),
        (
            dict(max_acceleration=3e38, min_acceleration=-3e38),
            "max_acceleration - min_acceleration is inf",
        ),
        (dict(max_turn=1e39), "max_turn must be representable in float32"),
        (dict(min_turn=-1e39), "min_turn must be representable in float32"),
        (dict(max_speed=1e38, skill_level_runner=10.0), "max_speed \\* skill_level_runner"),
        (dict(max_speed=1e-30, skill_level_tagger=1e-20), "max_speed \\* skill_level_tagger"),
        (dict(tagging_distance=1e-50), "tagging_distance must be representable in float32"),
        (dict(tagging_distance=1e-30, grid_length=1e-18), "tagging_distance \\* grid_length"),
        (
            dict(edge_hit_penalty=-3e38, step_penalty_for_tagger=-3e38),
            "edge_hit_penalty \\+ step_penalty_for_tagger",
        ),
        (dict(tag_reward_for_tagger=1e38), "num_runners \\* tag_reward_for_tagger"),
        (
            dict(edge_hit_penalty=-3e38, tag_penalty_for_runner=-3e38),
            "edge_hit_penalty \\+ tag_penalty_for_runner",
        ),
        (
            dict(step_reward_for_runner=3e38, end_of_game_reward_for_runner=3e38),
            "step_reward_for_runner \\+ end_of",
        ),
        (dict(max_speed=10**400), "max_speed must be a finite number"),
        (dict(episode_length=2**31), r"episode_length must be an int in \[1, 2147483647\]"),
        (
            dict(num_acceleration_levels=10**8),
            r"num_acceleration_levels must be an int in \[0, 1000000\]",
        ),
        (dict(num_turn_levels=10**6 + 1), r"num_turn_levels must be an int in \[0, 1000000\]"),
        (dict(seed=2**63), r"seed must be an int in \[0, 9223372036854775807\]"),
    ],
)
def test_tag_parameters_the_float32_kernel_cannot_run_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TagParams(**kwargs)


def test_tag_parameters_at_the_float32_limits_are_accepted():
    low, high = tag_params.grid_length_range(2)
    for length in (low, high):
        assert TagParams(grid_length=length).grid_length == length
    TagParams(max_acceleration=1.7e38, min_acceleration=-1.7e38, max_turn=3e38, min_turn=0.0)
    TagParams(max_speed=1e38, skill_level_tagger=1.0, skill_level_runner=1.0, tagging_distance=0.0)


def test_action_levels_at_the_bound_allocate_no_level_table():
    tracemalloc.start()
    try:
        TagParams(num_acceleration_levels=10**6)  # validation only: no table per level
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # a float64 table of 10**6 levels would take 8 MB


@pytest.mark.parametrize(
    "kwargs, num_envs",
    [
        (dict(num_runners=10**6 - 1, use_full_observation=False), 1),  # ~2500 s
        (dict(num_runners=70_000 - 1, use_full_observation=True), 1),  # ~69 s
        (dict(num_runners=9_999, use_full_observation=False), 25_000),  # ~6250 s over the batch
    ],
)
def test_a_step_estimated_over_a_minute_is_refused(kwargs, num_envs):
    params = TagParams.__new__(
        TagParams
    )  # the estimate alone, without __post_init__'s own E=1 check
    object.__setattr__(params, "num_taggers", 1)
    for name, value in kwargs.items():
        object.__setattr__(params, name, value)
    assert tag_params.estimate_step_seconds(params, num_envs) > 60
    with pytest.raises(
        ValueError, match=r"O\(num_envs \* N\*\*2\), about [\d.e+]+ s .* over the 60 s limit"
    ):
        tag_params.check_step_cost(params, num_envs)
    if num_envs == 1:
        with pytest.raises(ValueError, match="over the 60 s limit"):
            TagParams(**kwargs)


def test_a_step_under_a_minute_is_accepted():
    params = TagParams(num_runners=100_000, use_full_observation=False)  # ~25 s on one core
    tag_params.check_step_cost(params, 2)
    assert tag_params.estimate_step_seconds(params, 1) == pytest.approx(100_001**2 * 2.5e-9)


def test_the_float32_constants_of_accepted_parameters_are_finite():
    params = TagParams(
        grid_length=6e18,
        max_speed=1e38,
        max_acceleration=1e38,
        min_acceleration=-1e38,
        max_turn=1e30,
        min_turn=-1e30,
        tag_reward_for_tagger=1e37,
        edge_hit_penalty=-1e38,
    )
    float_consts, _ = tag_logic.make_consts(params)
    assert np.isfinite(float_consts).all()
    for low, high, levels in (
        (params.min_acceleration, params.max_acceleration, 7),
        (params.min_turn, params.max_turn, 5),
    ):
        assert np.isfinite(tag_logic.action_levels(low, high, levels)).all()
    assert math.isfinite(float(np.float32(params.grid_length) ** 2 * np.float32(8)))


@pytest.mark.parametrize("k", [1, 2, 5])
def test_partial_observation_works_at_both_grid_length_limits(k):
    """At L = the accepted low and high ends, the neighbour search ends and observes the k
    nearest."""
    n = 13
    rng = np.random.default_rng(k)
    corners = rng.integers(0, 2, (2, n)).astype(
        np.float64
    )  # agents on the corners: the largest distances
    corners[:, 3] = 0.5
    for length in tag_params.grid_length_range(k):
        xs, ys = (corners * length).tolist()
        env = TagEnv(
            1,
            num_taggers=1,
            num_runners=n - 1,
            grid_length=length,
            use_full_observation=False,
            num_other_agents_observed=k,
            tagging_distance=0.0,
            starting_location_x=xs,
            starting_location_y=ys,
        )
        obs = env.reset(seed=0)[0][0, 3].numpy()
        assert np.isfinite(obs).all()
        seen = np.sort(obs[:k].astype(np.float64) ** 2 + obs[k : 2 * k].astype(np.float64) ** 2)
        others = [j for j in range(n) if j != 3]
        exact = np.sort(((corners[0, others] - 0.5) ** 2 + (corners[1, others] - 0.5) ** 2) / 2)[:k]
        np.testing.assert_allclose(seen, exact, rtol=1e-5)


@pytest.mark.parametrize("value", ["False", "true", 0, 1, None, np.array([True])])
def test_flags_are_bools_not_truthy_values(value):
    from gpu_envs.games.cartpole import CartPoleVectorEnv

    with pytest.raises(TypeError, match=r"^validate_actions must be a bool"):
        CartPoleVectorEnv(2, validate_actions=value)
    with pytest.raises(TypeError, match=r"^sutton_barto_reward must be a bool"):
        CartPoleVectorEnv(2, sutton_barto_reward=value)
    assert CartPoleVectorEnv(2, sutton_barto_reward=np.bool_(True)).sutton_barto_reward is True


def test_unclear_inputs_get_messages_that_name_them():
    from gpu_envs.games.cartpole import CartPoleVectorEnv
    from gpu_envs.games.pendulum import PendulumVectorEnv

    env = CartPoleVectorEnv(2)
    env.reset(seed=0)
    state = env.buffers_state()
    reference = CartPoleVectorEnv(2)
    reference.reset(seed=0)
    big_endian = np.array([0, 1], dtype=">i8")  # the same values in the other byte order
    assert torch.equal(env.step(big_endian)[0], reference.step(np.array([0, 1]))[0])
    for options in ("abc", 5, ["low"]):
        with pytest.raises(TypeError, match=r"^options must be a dict of reset options"):
            env.reset(options=options)
    with pytest.raises(ValueError, match=r"^options\['low'\] must be a finite number"):
        env.reset(options={"low": None})
    with pytest.raises(TypeError, match=r"buffer 'state' must be a torch.Tensor"):
        env.load_buffers_state({name: value.numpy() for name, value in state.items()})
    pendulum = PendulumVectorEnv(2)
    pendulum.reset(seed=0)
    with pytest.raises(ValueError, match=r"^options\['x_init'\] must be a finite number"):
        pendulum.reset(options={"x_init": None})
    pendulum.step(torch.zeros(2, 1, requires_grad=True))  # a policy's output, gradient and all

    class HalfPrecision(CartPoleVectorEnv):
        def buffer_layout(self):
            layout = super().buffer_layout()
            return {**layout, "state": (layout["state"][0], np.dtype(np.float16))}

    with pytest.raises(TypeError, match=r"buffers \{'state': 'float16'\} have dtypes"):
        HalfPrecision(2)
