"""Property tests: random configurations, actions, seeds and reset options thrown at every env face.

Property: every call either raises a clear ValueError/TypeError whose message names the bad
argument,
or returns finite outputs of the right shapes. The strategies draw small configurations (a bounded
amount of work per example); no property depends on speed, and pytest-timeout guards against a
hang. Each strategy draws a good value
or one of the catalogued bad ones (the ``BAD_*`` lists; ``count_bad_cases()`` counts them).

Runs: ``pytest tests/engine/test_fuzz.py`` (profile "fuzz": a few examples per test, about a
minute);
``HYPOTHESIS_PROFILE=long pytest tests/engine/test_fuzz.py`` (profile "long": 300 examples per
test).
Tests marked ``xfail(strict=True, reason="engine: ...")`` show bad input that code outside the
validators still lets through; wiring the validators in makes them pass (then drop the mark).
"""

from __future__ import annotations

import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import gpu_envs
from gpu_envs import tag_v0
from gpu_envs.engine.validation import is_int
from gpu_envs.games.tag import params as tag_params

settings.register_profile(
    "fuzz",
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("long" if os.environ.get("HYPOTHESIS_PROFILE") == "long" else "fuzz")
#: For the xfail tests: stop at the first failing example (no shrinking).
FUZZ_XFAIL = settings(FUZZ, phases=[Phase.explicit, Phase.reuse, Phase.generate])
#: Bad layouts that a kernel without a layout check would read (no new kernel signature: no
#: recompilation).
SAME_SIGNATURE_LAYOUTS = [
    lambda shape, upper: np.zeros((shape[0] - 1, *shape[1:]), np.int64),
    lambda shape, upper: np.full(shape, 0.7, np.float32),
]
NAN, INF = float("nan"), float("inf")

# ------------------------------------------------------------------------------ the bad-input
# catalogue
#: (value, what the error must name) for seeds given to reset (any face).
BAD_SEEDS = [
    (-1, "seed"),
    (2**63, "seed"),
    (2**64, "seed"),
    (1.5, "seed"),
    ("7", "seed"),
    (True, "seed"),
    ([0, 2**63], "seed"),
    ([0.5, 1], "seed"),
    (NAN, "seed"),
]
#: Bad options['reset_mask'] for n envs: a function of n.
BAD_MASKS = [
    lambda n: None,
    lambda n: np.ones(n + 1, bool),
    lambda n: np.ones(n, np.int64),
    lambda n: torch.ones(n, dtype=torch.bool, device="meta"),
    lambda n: ["yes"] * n,
    lambda n: torch.ones((n, 1), dtype=torch.bool),
]
#: Bad options['low'] / options['high'] for CartPole.
BAD_BOUNDS = [
    (NAN, 0.05),
    (-0.05, NAN),
    (-INF, 0.05),
    (-0.05, INF),
    (0.1, -0.1),
    (-1e300, 1e300),
    (-(2.0**61), 0.0),
    ("0", 0.1),
]
#: Bad CartPole max_episode_steps.
BAD_EPISODE_STEPS = ["10", 2**64, NAN, 1.5, -1, True, 2**31]
#: Bad integer actions of shape `shape` whose entries must lie in 0..upper: functions of (shape,
#: upper).
BAD_ACTIONS = [
    lambda shape, upper: np.full(shape, upper + 1),
    lambda shape, upper: np.full(shape, -1),
    lambda shape, upper: (
        np.zeros((shape[0] - 1, *shape[1:]), np.int64)
        if shape[0] > 1
        else np.zeros((2, *shape[1:]), np.int64)
    ),
    lambda shape, upper: np.zeros((*shape, 1), np.int64),
    lambda shape, upper: np.zeros(shape, np.float32),
    lambda shape, upper: np.full(shape, np.nan),
    lambda shape, upper: np.zeros(shape, bool),
    lambda shape, upper: torch.zeros(shape, dtype=torch.int64, device="meta"),
    lambda shape, upper: None,
    lambda shape, upper: np.full(shape, "a"),
    lambda shape, upper: np.full(shape, 2**63, dtype=np.uint64),
]
#: Tag parameters that must be refused: (overrides, the names the error may give).
BAD_TAG_PARAMS = [
    *[
        ({"grid_length": v}, ("grid_length",))
        for v in (1e-30, 2e19, 1e39, NAN, INF, -1.0, 0.0, "10", None)
    ],
    *[({"max_speed": v}, ("max_speed",)) for v in (NAN, INF, 0.0, -1.0, 1e39)],
    ({"skill_level_tagger": 1e39}, ("skill_level_tagger",)),
    ({"skill_level_runner": 0.0}, ("skill_level_runner",)),
    ({"max_speed": 1e38, "skill_level_runner": 4.0}, ("max_speed", "skill_level_runner")),
    (
        {"max_acceleration": 3e38, "min_acceleration": -3e38},
        ("max_acceleration", "min_acceleration"),
    ),
    ({"max_acceleration": NAN}, ("max_acceleration",)),
    ({"min_acceleration": 2.0, "max_acceleration": 1.0}, ("min_acceleration",)),
    ({"max_turn": 1e39}, ("max_turn",)),
    ({"min_turn": -1e39}, ("min_turn",)),
    ({"max_turn": INF}, ("max_turn",)),
    ({"num_acceleration_levels": 10**8}, ("num_acceleration_levels",)),
    ({"num_turn_levels": 10**7}, ("num_turn_levels",)),
    ({"num_turn_levels": 1.5}, ("num_turn_levels",)),
    ({"episode_length": 0}, ("episode_length",)),
    ({"episode_length": 2**31}, ("episode_length",)),
    ({"episode_length": 1.5}, ("episode_length",)),
    ({"num_taggers": 0}, ("num_taggers",)),
    ({"num_runners": 1.5}, ("num_runners",)),
    ({"num_runners": 10**6, "use_full_observation": False}, ("num_runners",)),
    ({"num_other_agents_observed": 0}, ("num_other_agents_observed",)),
    ({"tagging_distance": 1.5}, ("tagging_distance",)),
    ({"tagging_distance": 1e-50}, ("tagging_distance",)),
    ({"tag_reward_for_tagger": 1e39}, ("tag_reward_for_tagger",)),
    (
        {"edge_hit_penalty": -3e38, "tag_penalty_for_runner": -3e38},
        ("edge_hit_penalty", "tag_penalty_for_runner"),
    ),
    (
        {"step_reward_for_runner": 3e38, "end_of_game_reward_for_runner": 3e38},
        ("step_reward_for_runner",),
    ),
    ({"seed": 2**63}, ("seed",)),
    ({"seed": -1}, ("seed",)),
    ({"reset_mode": "sometimes"}, ("reset_mode",)),
    ({"observe_self": None}, ("observe_self",)),
    ({"use_full_observation": 1}, ("use_full_observation",)),
    ({"starting_location_x": [NAN] * 3}, ("starting_location_x",)),
    ({"starting_directions": [0.0]}, ("starting_directions",)),
]


def count_bad_cases() -> int:
    """How many kinds of bad input the suite draws from (each face draws from several lists)."""
    return sum(
        map(len, (BAD_SEEDS, BAD_MASKS, BAD_BOUNDS, BAD_EPISODE_STEPS, BAD_ACTIONS, BAD_TAG_PARAMS))
    )


# ------------------------------------------------------------------------------ the property
def assert_clear_error(error: BaseException, names: tuple[str, ...]) -> None:
    """A ValueError/TypeError with a message naming one of ``names``."""
    assert isinstance(error, (ValueError, TypeError)), f"{type(error).__name__}: {error}"
    message = str(error)
    assert message and any(name in message for name in names), (
        f"message {message!r} names none of {names}"
    )


def assert_finite(*arrays, shapes=None) -> None:
    for i, array in enumerate(arrays):
        array = torch.as_tensor(np.asarray(array) if not isinstance(array, torch.Tensor) else array)
        if array.is_floating_point():
            assert bool(torch.isfinite(array).all()), f"output {i} is not finite: {array}"
        if shapes is not None:
            assert tuple(array.shape) == tuple(shapes[i]), (
                f"output {i}: shape {tuple(array.shape)} != {shapes[i]}"
            )


def attempt(names: tuple[str, ...] | None, call, *args, **kwargs):
    """Run ``call``; with ``names`` (bad input) it must raise a clear error naming one, else
    succeed."""
    if names is None:
        return call(*args, **kwargs)
    with pytest.raises(Exception) as caught:
        call(*args, **kwargs)
    assert_clear_error(caught.value, names)
    return None


# ------------------------------------------------------------------------------ strategies
def maybe_bad(
    good: st.SearchStrategy, bad: list, names: tuple[str, ...] | str, p_bad=True
) -> st.SearchStrategy:
    """(value, None) from ``good`` or (bad value, names) from ``bad``."""
    names = (names,) if isinstance(names, str) else names
    good_pairs = good.map(lambda v: (v, None))
    if not p_bad:
        return good_pairs
    return st.one_of(good_pairs, st.sampled_from(bad).map(lambda v: (v, names)))


def seeds(num_envs: int, bad=True) -> st.SearchStrategy:
    good = st.one_of(
        st.none(),
        st.integers(0, 2**63 - num_envs),
        st.lists(st.integers(0, 2**63 - 1), min_size=num_envs, max_size=num_envs),
    )
    pairs = st.sampled_from(BAD_SEEDS).map(lambda p: (p[0], (p[1],)))
    return st.one_of(good.map(lambda v: (v, None)), pairs) if bad else good.map(lambda v: (v, None))


def masks(num_envs: int) -> st.SearchStrategy:
    good = st.lists(st.booleans(), min_size=num_envs, max_size=num_envs).map(
        lambda v: np.array(v, bool)
    )
    bad = st.sampled_from(BAD_MASKS).map(lambda make: (make(num_envs), ("reset_mask",)))
    return st.one_of(st.just((None, None)), good.map(lambda v: (v, None)), bad)


def int_actions(shape: tuple[int, ...], upper: int, bad=True) -> st.SearchStrategy:
    good = st.lists(
        st.integers(0, upper), min_size=math.prod(shape), max_size=math.prod(shape)
    ).map(lambda v: np.array(v, np.int64).reshape(shape))
    good = st.one_of(good, good.map(torch.from_numpy), good.map(lambda a: a.astype(np.int32)))
    pairs = good.map(lambda v: (v, None))
    if not bad:
        return pairs
    return st.one_of(
        pairs, st.sampled_from(BAD_ACTIONS).map(lambda make: (make(shape, upper), ("action",)))
    )


def floats32(low: float, high: float) -> st.SearchStrategy:
    """Floats that float32 represents exactly (the kernels' precision), in about [low, high]."""
    return st.floats(float(np.float32(low)), float(np.float32(high)), width=32)


def _float32_edges(k: int) -> list[float]:
    return list(tag_params.grid_length_range(k))


@st.composite
def tag_configs(draw, bad=True, max_agents=7, rows=False):
    """(params, names): valid Tag parameters, with at most one catalogued bad override (names: its
    names).

    ``rows``: for the (game, agent)-row faces, which set observe_self themselves.
    """
    num_taggers = draw(st.integers(1, 2))
    num_runners = draw(st.integers(1, max_agents - num_taggers))
    n = num_taggers + num_runners
    k = draw(st.integers(1, n))
    params = {
        "num_taggers": num_taggers,
        "num_runners": num_runners,
        "num_other_agents_observed": k,
        "use_full_observation": draw(st.booleans()),
        "observe_self": draw(st.booleans()),
        "runner_exits_game_after_tagged": draw(st.booleans()),
        "reset_mode": draw(st.sampled_from(["random", "fixed"])),
        "grid_length": draw(st.one_of(st.floats(1e-3, 1e6), st.sampled_from(_float32_edges(k)))),
        "episode_length": draw(st.one_of(st.integers(1, 30), st.just(2**31 - 1))),
        "num_acceleration_levels": draw(st.integers(0, 12)),
        "num_turn_levels": draw(st.integers(0, 12)),
        "tagging_distance": draw(st.one_of(st.just(0.0), st.floats(1e-3, 1.0))),
        "seed": draw(st.one_of(st.none(), st.integers(0, 2**63 - 64))),
    }
    huge = draw(st.booleans())  # the largest magnitudes the float32 rules allow
    params.update(
        max_speed=1e38 if huge else draw(st.floats(1e-3, 1e3)),
        skill_level_tagger=draw(floats32(0.1, 1.5)),
        skill_level_runner=draw(floats32(0.1, 1.5)),
        max_acceleration=1.7e38 if huge else draw(floats32(0.0, 1e3)),
        min_acceleration=-1.7e38 if huge else draw(floats32(-1e3, 0.0)),
        max_turn=1e30 if huge else draw(floats32(0.0, 10.0)),
        min_turn=-1e30 if huge else draw(floats32(-10.0, 0.0)),
        edge_hit_penalty=-1e38 if huge else draw(floats32(-10.0, 0.0)),
        step_penalty_for_tagger=-1e38 if huge else draw(floats32(-1.0, 0.0)),
        tag_reward_for_tagger=1e37 if huge else draw(floats32(0.0, 10.0)),
        tag_penalty_for_runner=-1e38 if huge else draw(floats32(-10.0, 0.0)),
        step_reward_for_runner=1e38 if huge else draw(floats32(0.0, 1.0)),
        end_of_game_reward_for_runner=1e38 if huge else draw(floats32(0.0, 10.0)),
    )
    if rows:
        del params["observe_self"]
    if bad and draw(st.booleans()):
        overrides, names = draw(
            st.sampled_from(
                [case for case in BAD_TAG_PARAMS if not (rows and "observe_self" in case[0])]
            )
        )
        return {**params, **overrides}, names
    return params, None


# ------------------------------------------------------------------------------ CartPole faces
CARTPOLE_MODES = ["next_step", "same_step", "disabled"]


def _cartpole_vector_session(data, env, n, *, bad_bounds: bool, disabled: bool):
    """A few random resets and steps on a CartPole vector env, checked against the property."""
    obs_shapes = [(n, 4), (n,), (n,), (n,)]
    attempt(None, env.reset, seed=0)
    for _ in range(data.draw(st.integers(1, 4), label="operations")):
        if data.draw(st.booleans(), label="reset?"):
            seed, seed_names = data.draw(seeds(n), label="seed")
            mask, mask_names = data.draw(masks(n), label="reset_mask")
            options = {} if mask is None and mask_names is None else {"reset_mask": mask}
            bounds_names = None
            if bad_bounds:
                (low, high), bounds_names = data.draw(
                    maybe_bad(st.just((-0.05, 0.05)), BAD_BOUNDS, ("low", "high"))
                )
                options.update(low=low, high=high)
            names = seed_names or mask_names or bounds_names
            if bool(seed_names) + bool(mask_names) + bool(bounds_names) > 1:
                names = tuple(
                    x for group in (seed_names, mask_names, bounds_names) if group for x in group
                )
            result = attempt(names, env.reset, seed=seed, options=options)
            if result is not None:
                assert_finite(result[0], shapes=[(n, 4)])
        else:
            actions, names = data.draw(int_actions((n,), 1), label="actions")
            if disabled and names is None and bool(env.unwrapped._tensors.needs_reset.any()):
                attempt(None, env.reset)
            result = attempt(names, env.step, actions)
            if result is not None:
                assert_finite(*result[:4], shapes=obs_shapes)


@FUZZ
@given(data=st.data())
def test_cartpole_make_vec(data):
    n = data.draw(st.integers(1, 9), label="num_envs")
    mode = data.draw(st.sampled_from(CARTPOLE_MODES), label="autoreset_mode")
    kwargs = dict(
        dtype=data.draw(st.sampled_from(["float32", "float64", None])),
        autoreset_mode=mode,
        sutton_barto_reward=data.draw(st.booleans()),
    )
    env = attempt(None, gym.make_vec, "gpu_envs/CartPole-v1", num_envs=n, **kwargs)
    _cartpole_vector_session(data, env, n, bad_bounds=False, disabled=mode == "disabled")


@FUZZ_XFAIL
@given(value=st.sampled_from(BAD_EPISODE_STEPS))
def test_cartpole_bad_max_episode_steps(value):
    attempt(
        ("max_episode_steps",),
        gym.make_vec,
        "gpu_envs/CartPole-v1",
        num_envs=2,
        max_episode_steps=value,
    )


@FUZZ_XFAIL
@given(data=st.data())
def test_cartpole_bad_reset_bounds(data):
    n = data.draw(st.integers(1, 5), label="num_envs")
    env = gpu_envs.CartPoleVectorEnv(n, dtype=data.draw(st.sampled_from(["float32", "float64"])))
    _cartpole_vector_session(data, env, n, bad_bounds=True, disabled=False)


@FUZZ_XFAIL
@given(data=st.data())
def test_cartpole_layout_without_action_validation(data):
    n = data.draw(st.integers(2, 6), label="num_envs")
    env = gpu_envs.CartPoleVectorEnv(n, validate_actions=False)
    env.reset(seed=0)
    make = data.draw(st.sampled_from(SAME_SIGNATURE_LAYOUTS), label="bad layout")
    attempt(("action",), env.step, make((n,), 1))


@FUZZ
@given(data=st.data())
def test_cartpole_make_single(data):
    env = gym.make("gpu_envs/CartPole-v1")
    attempt(None, env.reset, seed=data.draw(st.integers(0, 2**63 - 1)))
    for _ in range(data.draw(st.integers(1, 6), label="operations")):
        action, names = data.draw(
            maybe_bad(
                st.sampled_from([0, 1, np.int64(1)]),
                [2, -1, 0.5, "a", None, np.array([0, 1]), NAN],
                "action",
            )
        )
        result = attempt(names, env.step, action)
        if result is not None:
            assert_finite(result[0], shapes=[(4,)])
            assert math.isfinite(result[1])
            if result[2] or result[3]:
                attempt(None, env.reset)
        seed, names = data.draw(seeds(1, bad=False))
        if data.draw(st.booleans()):
            mask, mask_names = data.draw(masks(1))
            options = None if mask is None and mask_names is None else {"reset_mask": mask}
            result = attempt(
                mask_names, env.reset, seed=seed if isinstance(seed, int) else None, options=options
            )
            if result is not None:
                assert_finite(result[0], shapes=[(4,)])


@FUZZ_XFAIL
@given(seed=st.sampled_from([s for s, _ in BAD_SEEDS if not isinstance(s, list)]))
def test_cartpole_make_single_bad_seed(seed):
    attempt(("seed",), gym.make("gpu_envs/CartPole-v1").reset, seed=seed)


# ------------------------------------------------------------------------------ Tag faces
@FUZZ
@given(data=st.data())
def test_tag_env(data):
    params, param_names = data.draw(tag_configs(), label="params")
    n_envs = data.draw(st.integers(1, 3), label="num_envs")
    mode = data.draw(st.sampled_from(CARTPOLE_MODES), label="autoreset_mode")
    env = attempt(param_names, gpu_envs.TagEnv, n_envs, autoreset_mode=mode, **params)
    if env is None:
        return
    n = env.num_agents
    shapes = [(n_envs, n, env.obs_dim), (n_envs, n), (n_envs,), (n_envs,)]
    result = attempt(None, env.reset)
    assert_finite(result[0], shapes=shapes[:1])
    for _ in range(data.draw(st.integers(1, 4), label="operations")):
        if data.draw(st.booleans(), label="reset?"):
            seed, seed_names = data.draw(seeds(n_envs), label="seed")
            mask, mask_names = data.draw(masks(n_envs), label="reset_mask")
            options = None if mask is None and mask_names is None else {"reset_mask": mask}
            names = (seed_names or ()) + (mask_names or ()) or None
            result = attempt(names, env.reset, seed=seed, options=options)
            if result is not None:
                assert_finite(result[0], shapes=shapes[:1])
            continue
        upper = min(env.action_nvec) - 1
        actions, names = data.draw(int_actions((n_envs, n, 2), upper), label="actions")
        if mode == "disabled" and names is None and bool(env._tensors.needs_reset.any()):
            attempt(None, env.reset)
        result = attempt(names, env.step, actions)
        if result is not None:
            assert_finite(*result[:4], shapes=shapes)
            assert_finite(*env.state.values())


@FUZZ_XFAIL
@given(data=st.data())
def test_tag_layout_without_action_validation(data):
    env = gpu_envs.TagEnv(2, num_runners=2, validate_actions=False)
    env.reset(seed=0)
    make = data.draw(st.sampled_from(SAME_SIGNATURE_LAYOUTS), label="bad layout")
    attempt(("action",), env.step, make((2, 3, 2), 10))


def test_tag_batch_whose_step_takes_minutes_is_refused():
    # 20 games x 50k agents, partial observation: ~125 s a step on one core (and as long for reset);
    # small buffers (only construction runs here).
    with pytest.raises(ValueError, match="num_envs"):
        gpu_envs.TagEnv(
            20, num_runners=49_999, use_full_observation=False, num_other_agents_observed=1
        )


@FUZZ
@given(data=st.data())
def test_tag_parallel_env(data):
    params, names = data.draw(tag_configs(), label="params")
    env = attempt(names, tag_v0.parallel_env, **params)
    if env is None:
        return
    seed, seed_names = data.draw(seeds(1), label="seed")
    seed_names = None if seed_names is None or isinstance(seed, list) else seed_names
    if isinstance(seed, list):
        seed = seed[0] if all(isinstance(s, int) and 0 <= s < 2**63 for s in seed) else seed
    if isinstance(seed, list):
        return
    observations = attempt(seed_names, env.reset, seed=seed)
    if observations is None:
        return
    for _ in range(data.draw(st.integers(1, 4), label="steps")):
        if not env.agents:
            break
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        names = None
        if data.draw(st.booleans(), label="bad?"):
            agent = data.draw(st.sampled_from(env.agents))
            kind = data.draw(
                st.sampled_from(["missing", "extra", "high", "negative", "shape", "float", "none"])
            )
            names = (agent,) if kind != "extra" else ("not in the game",)
            if kind == "missing":
                del actions[agent]
            elif kind == "extra":
                actions["runner_999"] = np.zeros(2, np.int64)
            else:
                actions[agent] = {
                    "high": np.array([10**6, 0]),
                    "negative": np.array([-1, 0]),
                    "shape": np.zeros(3, np.int64),
                    "float": np.array([0.5, 0.0]),
                    "none": None,
                }[kind]
        result = attempt(names, env.step, actions)
        if result is not None:
            obs, rewards = result[0], result[1]
            for agent, row in obs.items():
                assert_finite(row, shapes=[env.observation_space(agent).shape])
            assert all(math.isfinite(r) for r in rewards.values())
            assert_finite(env.state())


@FUZZ
@given(data=st.data())
def test_tag_make_vec_rows(data):
    params, names = data.draw(tag_configs(rows=True), label="params")
    games = data.draw(st.integers(1, 3), label="games")
    env = attempt(names, gym.make_vec, "gpu_envs/Tag-v0", num_envs=games, **params)
    if env is None:
        return
    rows = env.num_envs
    obs, _ = attempt(None, env.reset, seed=data.draw(st.integers(0, 2**63 - games)))
    assert_finite(obs, shapes=[(rows, env.single_observation_space.shape[0])])
    actions, names = data.draw(int_actions((rows, 2), int(min(env.single_action_space.nvec)) - 1))
    result = attempt(names, env.step, actions)
    if result is not None:
        assert_finite(*result[:4], shapes=[obs.shape, (rows,), (rows,), (rows,)])


# ------------------------------------------------------------------------------ adapters
@FUZZ
@given(data=st.data())
def test_sb3_adapter(data):
    from gpu_envs.adapters.sb3 import make_sb3_vec_env

    tag = data.draw(st.booleans(), label="tag?")
    games = data.draw(st.integers(1, 3), label="num_envs")
    if tag:
        params, names = data.draw(tag_configs(max_agents=4, rows=True), label="params")
        venv = attempt(names, make_sb3_vec_env, "gpu_envs/Tag-v0", num_envs=games, **params)
    else:
        venv = attempt(None, make_sb3_vec_env, "gpu_envs/CartPole-v1", num_envs=games)
    if venv is None:
        return
    # SB3's own VecEnv.seed adds the env index to the seed (non-ints: see
    # test_sb3_adapter_non_int_seed).
    seed, seed_names = data.draw(
        seeds(games).filter(lambda p: p[0] is None or is_int(p[0])), label="seed"
    )
    venv.seed(seed)
    obs = attempt(seed_names, venv.reset)
    if obs is None:
        venv.seed(0)
        obs = attempt(None, venv.reset)
    assert_finite(obs, shapes=[(venv.num_envs, *venv.observation_space.shape)])
    shape = (venv.num_envs, *venv.action_space.shape)
    upper = 1 if not tag else int(min(venv.action_space.nvec)) - 1
    for _ in range(data.draw(st.integers(1, 3), label="steps")):
        # SB3 hands NumPy arrays (None and meta tensors: see
        # test_sb3_adapter_actions_that_are_not_arrays).
        actions, names = data.draw(
            int_actions(shape, upper).filter(
                lambda p: p[0] is not None and not (isinstance(p[0], torch.Tensor) and p[0].is_meta)
            ),
            label="actions",
        )
        if isinstance(actions, torch.Tensor):
            actions = actions.numpy()
        result = attempt(names, venv.step, actions)
        if result is not None:
            assert_finite(*result[:3], shapes=[obs.shape, (venv.num_envs,), (venv.num_envs,)])


@pytest.mark.parametrize("actions", [None, torch.zeros(2, dtype=torch.int64, device="meta")])
def test_sb3_adapter_actions_that_are_not_arrays(actions):
    from gpu_envs.adapters.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("gpu_envs/CartPole-v1", num_envs=2)
    venv.reset()
    attempt(("action",), venv.step, actions)


@pytest.mark.parametrize("seed", [True, "7"])
def test_sb3_adapter_non_int_seed(seed):
    from gpu_envs.adapters.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("gpu_envs/CartPole-v1", num_envs=2)
    attempt(("seed",), lambda: (venv.seed(seed), venv.reset()))


@FUZZ
@given(data=st.data())
def test_torchrl_envs(data):
    from gpu_envs.adapters.torchrl import CartPoleTorchRLEnv, TagTorchRLEnv

    n = data.draw(st.integers(1, 3), label="num_envs")
    if data.draw(st.booleans(), label="tag?"):
        params, names = data.draw(tag_configs(max_agents=5), label="params")
        env = attempt(names, TagTorchRLEnv, n, **params)
    else:
        env = attempt(None, CartPoleTorchRLEnv, n)
    if env is None:
        return
    # Non-negative ints only: TorchRL's set_seed handles the rest itself (see
    # test_torchrl_negative_seed).
    seed, seed_names = data.draw(
        st.one_of(
            st.integers(0, 2**63 - n).map(lambda v: (v, None)),
            st.sampled_from([(2**63, ("seed",)), (2**64, ("seed",))]),
        ),
        label="seed",
    )
    try:
        env.set_seed(seed)
        td = env.reset()
        assert seed_names is None, f"seed {seed} accepted"
    except (ValueError, TypeError) as error:
        assert_clear_error(error, seed_names or ("seed",))
        env.set_seed(0)
        td = env.reset()
    td = env.rollout(3, break_when_any_done=False)
    for key, value in td.items(include_nested=True, leaves_only=True):
        if value.is_floating_point():
            assert bool(torch.isfinite(value).all()), f"{key} is not finite"
    action_key = env.action_keys[0]
    td = env.reset()
    td = env.rand_action(td)
    bad = td.get(action_key) + data.draw(st.sampled_from([-100, 100]))
    td.set(action_key, bad)
    with pytest.raises(Exception) as caught:
        env.step(td)
    assert_clear_error(caught.value, ("action",))


def test_torchrl_negative_seed():
    from gpu_envs.adapters.torchrl import CartPoleTorchRLEnv

    attempt(("seed",), CartPoleTorchRLEnv(2).set_seed, -1)


def test_the_catalogue_is_counted():
    assert (
        count_bad_cases()
        == len(BAD_SEEDS)
        + len(BAD_MASKS)
        + len(BAD_BOUNDS)
        + len(BAD_EPISODE_STEPS)
        + len(BAD_ACTIONS)
        + len(BAD_TAG_PARAMS)
        > 80
    )
