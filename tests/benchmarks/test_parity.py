"""gpu_envs.benchmarks.parity: the near-tie classifiers on contrived ties, the game rules on
contrived
divergences, compare_envs end to end on two CPU CartPoles (identical, perturbed, misconfigured),
and compare_devices (the check behind device-check) with the CPU on both sides."""

import math
from functools import partial

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gpu_envs import CartPoleVectorEnv, PendulumVectorEnv
from gpu_envs.benchmarks.parity import (
    DEFAULT_TOLERANCES,
    DEFAULT_ULPS,
    THETA_THRESHOLD,
    X_THRESHOLD,
    Divergence,
    Mismatch,
    Outcome,
    ParityReport,
    cartpole_rules,
    classify_knn_difference,
    classify_tag_difference,
    classify_termination_difference,
    compare_devices,
    compare_envs,
    random_actions,
    state_snapshot,
    tag_rules,
    ulp_distance,
)
from gpu_envs.games.tag.env import TagEnv
from gpu_envs.games.tag.params import TagParams
from gpu_envs.games.tag.seed import seed_config

NEAR_TIE, MISMATCH = Outcome.NEAR_TIE, Outcome.MISMATCH


def _ulps_above(value, n: int) -> np.float32:
    value = np.float32(value)
    for _ in range(n):
        value = np.nextafter(value, np.float32(np.inf))
    return value


# ------------------------------------------------------------------------------------ classifiers
def test_knn_neighbours_one_ulp_apart_are_a_near_tie_ten_percent_a_mismatch():
    d2 = np.float32(1.7)
    assert classify_knn_difference(d2, _ulps_above(d2, 1)) is NEAR_TIE
    assert classify_knn_difference(_ulps_above(d2, 1), d2) is NEAR_TIE
    assert classify_knn_difference(d2, d2 * np.float32(1.1)) is MISMATCH


@given(st.floats(min_value=2.0**-20, max_value=2.0**20, width=32), st.integers(0, 64))
def test_knn_near_tie_is_exactly_the_ulps_window(d2, ulps):
    expected = NEAR_TIE if ulps <= DEFAULT_ULPS else MISMATCH
    assert classify_knn_difference(d2, _ulps_above(d2, ulps)) is expected


def test_ulp_distance_counts_float32_steps_across_zero_and_binades():
    assert ulp_distance(1.0, 1.0) == 0 and ulp_distance(-0.0, 0.0) == 0
    assert ulp_distance(np.nextafter(np.float32(2), np.float32(0)), _ulps_above(2.0, 1)) == 2
    tiny = np.nextafter(np.float32(0), np.float32(1))
    assert ulp_distance(-tiny, tiny) == 2
    assert ulp_distance(float("nan"), 1.0) == math.inf


def test_runner_at_the_tag_margin_plus_or_minus_one_ulp_is_a_near_tie():
    margin = np.float32(0.02) * np.float32(20.0)
    below = np.nextafter(margin, np.float32(0))
    for distance in (margin, below, _ulps_above(margin, 1)):
        assert classify_tag_difference(distance, margin) is NEAR_TIE
    assert classify_tag_difference(margin * np.float32(0.99), margin) is MISMATCH
    assert classify_tag_difference(_ulps_above(margin, 2), margin, ulps=1) is MISMATCH


@pytest.mark.parametrize("offset", [-1e-15, 1e-15])
def test_cartpole_at_a_threshold_within_tolerance_is_a_near_tie(offset):
    assert classify_termination_difference(X_THRESHOLD + offset, 0.01) is NEAR_TIE
    assert classify_termination_difference(-(X_THRESHOLD + offset), 0.01) is NEAR_TIE
    assert classify_termination_difference(0.1, -(THETA_THRESHOLD + offset)) is NEAR_TIE


def test_cartpole_off_a_threshold_is_a_mismatch_and_float32_has_a_wider_window():
    assert classify_termination_difference(X_THRESHOLD - 1e-3, 0.01) is MISMATCH  # a real bug
    assert classify_termination_difference(1.0, THETA_THRESHOLD + 1e-3) is MISMATCH
    float32 = DEFAULT_TOLERANCES[torch.float32]
    assert classify_termination_difference(X_THRESHOLD + 5e-5, 0.01) is MISMATCH
    assert classify_termination_difference(X_THRESHOLD + 5e-5, 0.01, float32) is NEAR_TIE


# ------------------------------------------------------------------------------------ game rules
def _divergence(fields, reference, candidate, previous=None):
    return Divergence(3, 0, tuple(fields), reference, candidate, previous, DEFAULT_TOLERANCES)


def _cartpole_fields(x, terminated):
    return {
        "terminated": torch.tensor(terminated),
        "state": torch.tensor([x, 0.0, 0.01, 0.0], dtype=torch.float64),
    }


@pytest.mark.parametrize("x, explained", [(X_THRESHOLD - 1e-15, True), (X_THRESHOLD - 1e-3, False)])
def test_termination_rule_reads_the_state_of_the_backend_that_did_not_terminate(x, explained):
    rule = cartpole_rules()["termination"]
    reset_state = 0.03  # SAME_STEP: the terminated backend already holds its next episode
    for ref, cand in (
        (_cartpole_fields(x, False), _cartpole_fields(reset_state, True)),
        (_cartpole_fields(reset_state, True), _cartpole_fields(x, False)),
    ):
        detail = rule(_divergence(("terminated", "state"), ref, cand))
        assert (detail is not None) == explained, detail


def _tag_fields(x, y, active, rewards, obs=None, t=3):
    fields = {
        "x": torch.tensor(x, dtype=torch.float32),
        "y": torch.tensor(y, dtype=torch.float32),
        "active": torch.tensor(active),
        "rewards": torch.tensor(rewards, dtype=torch.float32),
        "t": torch.tensor(t, dtype=torch.int32),
    }
    if obs is not None:
        fields["obs"] = obs
    return fields


TAG_RADIUS = tag_rules(
    TagParams(num_taggers=1, num_runners=1, grid_length=20.0, tagging_distance=0.02)
)["tag radius"]
MARGIN = np.float32(0.02) * np.float32(20.0)


@pytest.mark.parametrize(
    "runner_x, explained",
    [(_ulps_above(MARGIN, 1), True), (MARGIN, True), (MARGIN * np.float32(0.5), False)],
)
def test_tag_radius_rule_explains_a_tag_flip_only_at_the_margin(runner_x, explained):
    x, y = [0.0, float(runner_x)], [0.0, 0.0]
    ref = _tag_fields(x, y, [True, True], [0.0, 0.0])
    cand = _tag_fields(x, y, [True, False], [1.0, -1.0])
    assert (TAG_RADIUS(_divergence(("active", "rewards"), ref, cand)) is not None) == explained


def test_tag_radius_rule_does_not_explain_moved_agents():
    ref = _tag_fields([0.0, float(MARGIN)], [0.0, 0.0], [True, True], [0.0, 0.0])
    cand = _tag_fields([0.0, float(MARGIN)], [0.0, 0.5], [True, False], [1.0, -1.0])
    assert TAG_RADIUS(_divergence(("active", "rewards", "y"), ref, cand)) is None


KNN_PARAMS = TagParams(
    num_taggers=1,
    num_runners=2,
    grid_length=10.0,
    use_full_observation=False,
    num_other_agents_observed=2,
)
KNN_ORDER = tag_rules(KNN_PARAMS)["kNN order"]


def _observation(x, y, order):
    """Agent 0's observation of neighbours ``order`` (two columns, seven blocks, then t/T); other
    rows 0."""
    obs = torch.zeros((3, 7 * 2 + 1))
    for column, j in enumerate(order):
        for block, value in enumerate((x[j], y[j], 0.0, 0.0, 0.0, float(j < 1), 1.0)):
            obs[0, block * 2 + column] = value
    obs[0, -1] = 0.03
    return obs


@pytest.mark.parametrize("y2, explained", [(float(_ulps_above(1.0, 1)), True), (1.05, False)])
def test_knn_rule_explains_swapped_neighbours_only_when_tied(y2, explained):
    x, y = [0.0, 1.0, 0.0], [0.0, 0.0, y2]  # agent 0 at the origin: d2 = 1 and y2**2
    ref = _tag_fields(x, y, [True] * 3, [0.0] * 3, _observation(x, y, [1, 2]))
    cand = _tag_fields(x, y, [True] * 3, [0.0] * 3, _observation(x, y, [2, 1]))
    assert (KNN_ORDER(_divergence(("obs",), ref, cand)) is not None) == explained


def test_knn_rule_does_not_explain_differences_outside_the_tied_columns():
    x, y = [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
    ref = _tag_fields(x, y, [True] * 3, [0.0] * 3, _observation(x, y, [1, 2]))
    cand_obs = _observation(x, y, [2, 1])
    cand_obs[0, -1] = 0.5  # the time slot is no neighbour's
    cand = _tag_fields(x, y, [True] * 3, [0.0] * 3, cand_obs)
    assert KNN_ORDER(_divergence(("obs",), ref, cand)) is None
    assert (
        KNN_ORDER(
            _divergence(
                ("obs", "x"),
                ref,
                _tag_fields(x, y, [True] * 3, [0.0] * 3, _observation(x, y, [2, 1])),
            )
        )
        is None
    )


# ------------------------------------------------------------------------------------ end to end
class _Perturbed(CartPoleVectorEnv):
    """A CartPole that adds ``offset`` to env 3's cart position after its 4th step."""

    def __init__(self, *args, offset: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.offset, self.calls = offset, 0

    def step(self, actions):
        result = super().step(actions)
        self.calls += 1
        if self.calls == 4:
            state = self.state.clone()
            state[3, 0] += self.offset
            self.state = state
        return result


def _compare(candidate, steps=30, num_envs=8, **kwargs) -> ParityReport:
    reference = CartPoleVectorEnv(num_envs, dtype="float64", max_episode_steps=20, **kwargs)
    generator = torch.Generator().manual_seed(1)
    return compare_envs(
        reference,
        candidate,
        lambda _: torch.randint(0, 2, (num_envs,), generator=generator),
        steps,
        seed=5,
    )


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_identical_cpu_envs_pass_with_every_field_exact(mode):
    report = _compare(
        CartPoleVectorEnv(8, dtype="float64", max_episode_steps=20, autoreset_mode=mode),
        autoreset_mode=mode,
    )
    assert report.verdict == "PASS" and report.diverged_envs == 0
    assert {entry.outcome for entry in report.fields} == {Outcome.EXACT}
    names = {entry.field for entry in report.fields}
    assert {
        "obs",
        "rewards",
        "terminated",
        "state",
        "elapsed",
        "needs_reset",
        "episode",
        "env_seed",
    } <= names
    assert {entry.step for entry in report.fields} == set(range(31))  # the reset and 30 steps
    assert set(report.max_abs_diff().values()) == {0.0}


def test_a_perturbed_env_fails_naming_the_field_step_and_env():
    report = _compare(_Perturbed(8, dtype="float64", max_episode_steps=20, offset=1e-3))
    assert report.verdict == "FAIL"
    assert report.mismatches == [Mismatch(step=4, env=3, fields=("state",))]
    assert "mismatch at step 4, env 3: state" in report.summary()
    [entry] = [e for e in report.fields if e.step == 4 and e.field == "state"]
    assert entry.outcome is Outcome.MISMATCH and entry.envs == (3,)
    assert entry.max_abs_diff == pytest.approx(1e-3)
    assert report.to_record()["mismatches"] == [{"step": 4, "env": 3, "fields": ("state",)}]


def test_a_drift_within_tolerance_passes_and_is_reported_as_such():
    report = _compare(_Perturbed(8, dtype="float64", max_episode_steps=20, offset=1e-12))
    assert report.verdict == "PASS" and not report.mismatches and not report.near_ties
    [entry] = [e for e in report.fields if e.step == 4 and e.field == "state"]
    assert entry.outcome is Outcome.WITHIN_TOLERANCE and entry.envs == ()
    assert 0 < report.max_abs_diff()["state"] <= 1e-9


def test_an_integer_difference_fails_at_its_first_step():
    report = _compare(CartPoleVectorEnv(8, dtype="float64", max_episode_steps=10))
    assert report.verdict == "FAIL" and report.mismatches
    assert min(m.step for m in report.mismatches) == 10
    assert all("truncated" in m.fields for m in report.mismatches if m.step == 10)


def test_envs_that_cannot_be_compared_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="num_envs differs"):
        _compare(CartPoleVectorEnv(4, dtype="float64"))
    with pytest.raises(
        ValueError, match="field 'state' is .*float64 on the reference and .*float32"
    ):
        _compare(CartPoleVectorEnv(8, dtype="float32", max_episode_steps=20))


def test_state_snapshot_prefers_the_env_method_and_falls_back_to_copies():
    class WithSnapshot:
        def state_snapshot(self):
            return {"x": torch.ones(2)}

    assert state_snapshot(WithSnapshot())["x"].tolist() == [1.0, 1.0]
    env = CartPoleVectorEnv(3, dtype="float64")
    env.reset(seed=0)
    snapshot = state_snapshot(env)
    assert snapshot["state"].shape == (3, 4) and torch.equal(snapshot["state"], env.state)
    snapshot["state"].add_(1.0)
    assert not torch.equal(snapshot["state"], env.state)  # a copy


# ------------------------------------------------------------------------------------ devices
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_cartpole_on_identical_devices_passes_exactly(dtype, mode):
    make_env = partial(
        CartPoleVectorEnv, 16, dtype=dtype, autoreset_mode=mode, max_episode_steps=20
    )
    report = compare_devices(make_env, 120, device="cpu")
    assert report.verdict == "PASS", report.summary()
    assert report.diverged_envs == 0
    assert set(report.max_abs_diff().values()) == {0.0}


def test_tag_on_identical_devices_passes_exactly():
    report = compare_devices(partial(TagEnv, 2, **seed_config()), 12, device="cpu")
    assert report.verdict == "PASS", report.summary()
    assert report.diverged_envs == 0 and not report.near_ties


def test_compare_devices_closes_both_envs():
    built = []

    def make_env(device):
        built.append(CartPoleVectorEnv(2, device=device, dtype="float64"))
        return built[-1]

    compare_devices(make_env, 3, device="cpu")
    assert len(built) == 2 and all(env.closed for env in built)


def test_random_actions_cover_each_action_space_within_its_bounds():
    generator = torch.Generator().manual_seed(0)
    cartpole = random_actions(CartPoleVectorEnv(5), generator, (40,))
    assert cartpole.shape == (40, 5) and cartpole.dtype == torch.int64
    assert set(cartpole.unique().tolist()) == {0, 1}
    torques = random_actions(PendulumVectorEnv(5), generator)
    assert torques.shape == (5, 1) and torques.dtype == torch.float32
    assert torques.abs().max() <= 2.0 and torques.unique().numel() == 5
    tag = TagEnv(3, **seed_config())
    levels = random_actions(tag, generator, (4,))
    assert levels.shape == (4, 3, tag.num_agents, 2) and levels.dtype == torch.int64
    for component, nvec in enumerate(tag.action_nvec):
        assert set(levels[..., component].unique().tolist()) == set(range(nvec))
