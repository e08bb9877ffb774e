"""Conformance of the batched Tag env (CPU backend) with docs/spec-tag.md.

Expected values are computed here by hand on tiny worlds, or by an independent NumPy reference of
the rules (``reference_step`` / ``reference_obs``), never by the kernels themselves.
"""

import dataclasses
import hashlib
import math

import numba
import numpy as np
import pytest
import torch

from gpu_envs.games.tag.env import TagEnv
from gpu_envs.games.tag.params import TagParams
from gpu_envs.kernels import tag_logic
from tests.helpers.seed_run_config import SEED_RUN_CONFIG

F32 = np.float32
TWO_PI = F32(2 * math.pi)

SEED_CONFIG = SEED_RUN_CONFIG["env"]  # the notebook's env section, verbatim
# A tiny world: 2 taggers + 3 runners on a 10 x 10 arena, 3 acceleration and 3 turn levels.
TINY = dict(
    num_taggers=2,
    num_runners=3,
    grid_length=10.0,
    episode_length=5,
    max_speed=1.0,
    min_acceleration=-0.5,
    max_acceleration=0.5,
    num_acceleration_levels=3,
    min_turn=-0.5,
    max_turn=0.5,
    num_turn_levels=3,
    tagging_distance=0.05,
    tag_reward_for_tagger=2.0,
    tag_penalty_for_runner=-3.0,
    end_of_game_reward_for_runner=5.0,
    step_penalty_for_tagger=-0.25,
    step_reward_for_runner=0.125,
    edge_hit_penalty=-1.5,
)
NOOP = 0  # index 0: no change


def make(num_envs=1, **overrides):
    params = {**TINY, **overrides}
    return TagEnv(num_envs, "cpu", **params)


def place(env, **values):
    """Overwrite env 0's live state (x, y, heading, speed, acceleration: length-N lists)."""
    for key, row in values.items():
        tensor = env.state[key]
        tensor[0] = torch.as_tensor(np.asarray(row, dtype=np.float32 if key != "active" else bool))


def still(env):
    """Everyone far apart in a row, at rest, in the game."""
    n = env.num_agents
    place(
        env,
        x=[1.0 + 2.0 * i for i in range(n)],
        y=[5.0] * n,
        heading=[0.0] * n,
        speed=[0.0] * n,
        acceleration=[0.0] * n,
        active=[True] * n,
    )


def act(env, pairs=None):
    """Actions [1, N, 2]; ``pairs`` maps agent -> (acc index, turn index), others no change."""
    actions = np.zeros((1, env.num_agents, 2), dtype=np.int64)
    for agent, pair in (pairs or {}).items():
        actions[0, agent] = pair
    return actions


# ------------------------------------------------------------------------------ NumPy reference
def reference_obs(s, t, p):
    """Observations [N, obs_dim] of one env from state ``s`` (flags before the tags)."""
    n, nt = p.num_agents, p.num_taggers
    full = p.use_full_observation
    m = n - 1 if full else p.num_other_agents_observed
    dim = tag_logic.observation_size(n, full, p.num_other_agents_observed, p.observe_self)
    out = np.zeros((n, dim), np.float32)
    pos_norm, speed_norm = F32(math.sqrt(2) * p.grid_length), F32(p.max_speed + 1e-10)
    for i in range(n):
        row = out[i]
        if full:
            cols = [j for j in range(n) if j != i]
        elif s["active"][i]:
            d2 = {
                j: (s["x"][j] - s["x"][i]) * (s["x"][j] - s["x"][i])
                + (s["y"][j] - s["y"][i]) * (s["y"][j] - s["y"][i])
                for j in range(n)
                if j != i and s["active"][j]
            }
            cols = sorted(d2, key=lambda j: (d2[j], j))[:m]
        else:
            cols = []
        for c, j in enumerate(cols):
            if s["active"][i]:
                row[c] = (s["x"][j] - s["x"][i]) / pos_norm
                row[m + c] = (s["y"][j] - s["y"][i]) / pos_norm
                row[2 * m + c] = (s["speed"][j] - s["speed"][i]) / speed_norm
                row[3 * m + c] = (s["acceleration"][j] - s["acceleration"][i]) / speed_norm
                row[4 * m + c] = (s["heading"][j] - s["heading"][i]) / TWO_PI
            row[5 * m + c] = j < nt
            row[6 * m + c] = s["active"][j]
        if s["active"][i]:
            row[7 * m] = F32(t) / F32(p.episode_length)
        if p.observe_self:
            if s["active"][i]:
                row[7 * m + 1 : 7 * m + 5] = (
                    s["x"][i] / F32(p.grid_length),
                    s["y"][i] / F32(p.grid_length),
                    s["speed"][i] / F32(p.max_speed),
                    s["heading"][i] / TWO_PI,
                )
            row[7 * m + 5] = (i < nt) and (s["active"][i] or full)
    return out


def reference_step(s, actions, p):
    """One step of one env by the rules of docs/spec-tag.md: returns (new state, obs, rewards,
    done)."""
    n, nt, length = p.num_agents, p.num_taggers, F32(p.grid_length)
    acc_levels = tag_logic.action_levels(
        p.min_acceleration, p.max_acceleration, p.num_acceleration_levels
    )
    turn_levels = tag_logic.action_levels(p.min_turn, p.max_turn, p.num_turn_levels)
    s = {k: v.copy() for k, v in s.items()}
    rewards = np.zeros(n, np.float32)
    for a in range(n):
        if not s["active"][a]:
            s["heading"][a] = s["speed"][a] = s["acceleration"][a] = 0
            continue
        cap = F32(p.max_speed * (p.skill_level_tagger if a < nt else p.skill_level_runner))
        acc = s["acceleration"][a] + acc_levels[actions[a, 0]]
        heading = (s["heading"][a] + turn_levels[actions[a, 1]]) % TWO_PI  # NumPy float32 %
        speed = min(max(s["speed"][a] + acc, F32(0)), cap)
        if speed <= 0 or speed >= cap:
            acc = F32(0)
        x = s["x"][a] + speed * F32(math.cos(float(heading)))
        y = s["y"][a] + speed * F32(math.sin(float(heading)))
        edge = x < 0 or x > length or y < 0 or y > length
        s["x"][a], s["y"][a] = min(max(x, F32(0)), length), min(max(y, F32(0)), length)
        s["heading"][a], s["speed"][a], s["acceleration"][a] = heading, speed, acc
        step_term = F32(p.step_penalty_for_tagger if a < nt else p.step_reward_for_runner)
        rewards[a] = F32(p.edge_hit_penalty) + step_term if edge else step_term
    t = int(s["t"]) + 1
    obs = reference_obs(s, t, p)
    margin = F32(p.tagging_distance) * length
    credits = np.zeros(n, np.int64)
    for r in range(nt, n):
        if not s["active"][r]:
            continue
        d2 = [
            (s["x"][k] - s["x"][r]) * (s["x"][k] - s["x"][r])
            + (s["y"][k] - s["y"][r]) * (s["y"][k] - s["y"][r])
            for k in range(nt)
        ]
        best = int(np.argmin(d2))  # first minimum: the lower id
        if F32(math.sqrt(float(d2[best]))) < margin:
            rewards[r] += F32(p.tag_penalty_for_runner)
            credits[best] += 1
            if p.runner_exits_game_after_tagged:
                s["active"][r] = False
                s["speed"][r] = s["acceleration"][r] = 0
    for k in range(nt):
        if credits[k]:
            rewards[k] += F32(credits[k]) * F32(p.tag_reward_for_tagger)
    at_end = t >= p.episode_length
    if at_end:
        rewards[nt:] += np.where(s["active"][nt:], F32(p.end_of_game_reward_for_runner), F32(0))
    s["t"] = np.int32(t)
    return s, obs, rewards, at_end or not s["active"][nt:].any()


def snapshot(env, e=0):
    return {k: v[e].numpy().copy() for k, v in env.state.items()}


# ------------------------------------------------------------------------------ actions
@pytest.mark.parametrize(
    "low, high, levels",
    [
        (-0.1, 0.1, 10),
        (-2.35, 2.35, 10),
        (-1.0, 1.0, 10),
        (-math.pi / 2, math.pi / 2, 7),
        (0.3, 0.3, 1),
        (-1, 2, 2),
    ],
)
def test_action_levels_are_float32_linspace(low, high, levels):
    table = tag_logic.action_levels(low, high, levels)
    assert table.dtype == np.float32 and table[0] == 0.0 and len(table) == levels + 1
    expected = np.linspace(F32(low), F32(high), levels)
    assert expected.dtype == np.float32
    np.testing.assert_array_equal(table[1:].view(np.uint32), expected.view(np.uint32))
    # The formula of docs/spec-tag.md, written out.
    lo, hi = F32(low), F32(high)
    step = F32(hi - lo) / F32(levels - 1) if levels > 1 else F32(0)
    by_hand = [F32(F32(m) * step) + lo for m in range(levels)]
    if levels > 1:
        by_hand[-1] = hi
    np.testing.assert_array_equal(table[1:], np.array(by_hand, np.float32))


def test_action_levels_zero_levels_only_no_change():
    assert tag_logic.action_levels(-1, 1, 0).tolist() == [0.0]
    env = make(num_acceleration_levels=0, num_turn_levels=0)
    assert env.action_nvec == (1, 1)


def test_float64_rounded_levels_differ_from_the_spec():
    """Why the tables are float32 linspace: float64-then-round differs by an ulp for some levels."""
    table = tag_logic.action_levels(-2.35, 2.35, 10)[1:]
    rounded = np.linspace(-2.35, 2.35, 10).astype(np.float32)
    assert (table != rounded).any()


# ------------------------------------------------------------------------------ motion
def test_acceleration_persists_and_resets_at_speed_bounds():
    env = make(max_speed=0.6, min_acceleration=-0.25, max_acceleration=0.25)
    env.reset(seed=0)
    still(env)
    up, down = (3, 0), (1, 0)  # +0.25 and -0.25
    env.step(act(env, {2: up}))
    assert env.state["acceleration"][0, 2] == F32(0.25) and env.state["speed"][0, 2] == F32(0.25)
    env.step(act(env))  # no change: the acceleration persists
    assert env.state["acceleration"][0, 2] == F32(0.25) and env.state["speed"][0, 2] == F32(0.5)
    env.step(act(env))  # 0.75 clipped to the cap 0.6: acceleration reset
    assert env.state["speed"][0, 2] == F32(0.6) and env.state["acceleration"][0, 2] == 0.0
    env.step(act(env, {2: down}))  # 0.6 - 0.25
    assert env.state["speed"][0, 2] == F32(0.6) - F32(0.25)
    assert env.state["acceleration"][0, 2] == F32(-0.25)
    env.step(act(env))
    env.step(act(env))  # below 0: clipped to 0, acceleration reset
    assert env.state["speed"][0, 2] == 0.0 and env.state["acceleration"][0, 2] == 0.0


def test_skill_level_multiplies_the_speed_cap_only():
    env = make(max_speed=1.0, skill_level_tagger=0.5, skill_level_runner=2.0, max_acceleration=0.5)
    env.reset(seed=0)
    still(env)
    for _ in range(4):
        env.step(act(env, {0: (3, 0), 2: (3, 0)}))
    assert env.state["speed"][0, 0] == F32(0.5) and env.state["speed"][0, 2] == F32(2.0)


def test_heading_wraps_with_numpy_semantics_and_keeps_two_pi():
    env = make()
    env.reset(seed=0)
    still(env)
    just_below_half = np.nextafter(F32(0.5), F32(0))
    place(env, heading=[just_below_half, 6.0, 0.25, 0.0, 0.0])
    env.step(act(env, {0: (0, 1), 1: (0, 3), 2: (0, 1)}))  # turns -0.5, +0.5, -0.5
    heading = env.state["heading"][0].numpy()
    assert heading[0] == TWO_PI == F32(6.2831855)  # tiny negative -> float32(2pi), not folded to 0
    assert heading[0] == (just_below_half + F32(-0.5)) % TWO_PI
    assert heading[1] == (F32(6.0) + F32(0.5)) % TWO_PI and 0 < heading[1] < 1
    assert heading[2] == (F32(0.25) + F32(-0.5)) % TWO_PI


def test_move_uses_new_speed_and_heading_with_float64_trig():
    env = make(max_acceleration=0.5)
    env.reset(seed=0)
    still(env)
    env.step(act(env, {3: (3, 3)}))  # acc +0.5, turn +0.5 from heading 0
    speed = F32(0.5)
    assert env.state["x"][0, 3] == F32(7.0) + speed * F32(math.cos(0.5))
    assert env.state["y"][0, 3] == F32(5.0) + speed * F32(math.sin(0.5))


def test_wall_clamps_without_bounce_and_penalises():
    env = make(max_acceleration=0.5)
    env.reset(seed=0)
    still(env)
    place(
        env,
        x=[1.0, 3.0, 9.75, 7.0, 9.0],
        y=[5.0, 0.25, 5.0, 5.0, 5.0],
        heading=[0.0, 3 * math.pi / 2, 0.0, 0.0, 0.0],
        speed=[0.0, 0.5, 0.5, 0.0, 0.0],
    )
    heading_before = env.state["heading"][0].clone()
    _, rewards, *_ = env.step(act(env))
    x, y = env.state["x"][0].numpy(), env.state["y"][0].numpy()
    assert x[2] == F32(10.0) and y[2] == F32(5.0)  # clamped at L
    assert y[1] == 0.0 and x[1] == F32(3.0) + F32(0.5) * F32(math.cos(float(F32(3 * math.pi / 2))))
    assert env.state["speed"][0, 2] == F32(0.5) and torch.equal(
        env.state["heading"][0], heading_before
    )
    assert rewards[0].tolist() == [-0.25, -1.5 + -0.25, -1.5 + 0.125, 0.125, 0.125]


def test_agent_out_of_game_does_not_move_and_gets_zero():
    env = make()
    env.reset(seed=0)
    still(env)
    place(
        env,
        active=[True, True, False, True, True],
        speed=[0.0, 0.0, 0.7, 0.0, 0.0],
        heading=[0.0, 0.0, 2.0, 0.0, 0.0],
    )
    _, rewards, *_ = env.step(act(env, {2: (3, 3)}))
    assert env.state["x"][0, 2] == F32(5.0) and env.state["heading"][0, 2] == 0.0
    assert env.state["speed"][0, 2] == 0.0 and env.state["acceleration"][0, 2] == 0.0
    assert rewards[0, 2] == 0.0


# ------------------------------------------------------------------------------ tagging
def test_nearest_tagger_gets_credit_ties_to_lower_id():
    env = make(tagging_distance=0.03)  # margin 0.3
    env.reset(seed=0)
    still(env)
    place(env, x=[4.75, 5.25, 5.0, 1.0, 9.0], y=[5.0, 5.0, 5.0, 1.0, 1.0])
    _, rewards, terminated, *_ = env.step(act(env))
    assert rewards[0].tolist() == [-0.25 + 2.0, -0.25, 0.125 - 3.0, 0.125, 0.125]
    assert env.tag_count[0].tolist() == [1, 0, 1, 0, 0]
    assert env.active[0].tolist() == [True, True, False, True, True] and not terminated[0]
    env.reset(seed=0)
    still(env)
    place(env, x=[4.75, 5.125, 5.0, 1.0, 9.0], y=[5.0, 5.0, 5.0, 1.0, 1.0])
    _, rewards, *_ = env.step(act(env))
    assert rewards[0, :2].tolist() == [-0.25, -0.25 + 2.0]


def test_margin_is_strict_and_a_fraction_of_grid_length():
    env = make(tagging_distance=0.025)  # margin float32(0.025) * 10
    env.reset(seed=0)
    still(env)
    margin = F32(0.025) * F32(10.0)
    place(env, x=[5.0, 1.0, 5.0 + float(margin), 7.0, 9.0], y=[5.0, 9.0, 5.0, 1.0, 1.0])
    _, rewards, *_ = env.step(act(env))
    assert rewards[0, 2] == F32(0.125)  # distance == margin: not tagged
    env.reset(seed=0)
    still(env)
    place(
        env,
        x=[5.0, 1.0, float(np.nextafter(F32(5.0) + margin, F32(0))), 7.0, 9.0],
        y=[5.0, 9.0, 5.0, 1.0, 1.0],
    )
    _, rewards, *_ = env.step(act(env))
    assert rewards[0, 2] == F32(0.125) + F32(-3.0)


def test_one_tagger_tags_several_runners_in_one_step():
    env = make(tagging_distance=0.05)  # margin 0.5
    env.reset(seed=0)
    still(env)
    place(env, x=[5.0, 1.0, 5.25, 5.0, 4.75], y=[5.0, 1.0, 5.0, 5.25, 5.0])
    _, rewards, terminated, _, info = env.step(act(env))
    assert rewards[0].tolist() == [-0.25 + 3 * 2.0, -0.25, 0.125 - 3.0, 0.125 - 3.0, 0.125 - 3.0]
    assert env.tag_count[0].tolist() == [3, 0, 1, 1, 1]
    assert info["active"][0].tolist() == [True, True, False, False, False]
    assert terminated[0]  # no runner left


def test_tagged_runner_exits_frozen_and_later_gets_zero():
    env = make(episode_length=10)
    env.reset(seed=0)
    still(env)
    place(
        env,
        x=[5.0, 1.0, 5.5, 7.5, 9.5],
        speed=[0.0, 0.0, 0.25, 0.0, 0.0],
        heading=[0, 0, math.pi, 0, 0],
    )
    obs, rewards, *_ = env.step(act(env))  # runner 2 moves next to tagger 0, is tagged there
    x_tagged = env.state["x"][0, 2].item()
    assert env.state["speed"][0, 2] == 0.0 and not env.active[0, 2]
    assert obs[0, 2].abs().sum() > 0  # its observation at the tagging step is still a normal one
    obs, rewards, terminated, *_ = env.step(act(env, {2: (3, 3)}))
    assert env.state["x"][0, 2] == x_tagged and rewards[0, 2] == 0.0 and rewards[0, 0] == F32(-0.25)
    assert not terminated[0]


def test_runner_stays_and_is_tagged_again_when_not_exiting():
    env = make(runner_exits_game_after_tagged=False)
    env.reset(seed=0)
    still(env)
    place(env, x=[5.0, 1.0, 5.25, 7.5, 9.5])
    for _ in range(2):
        _, rewards, terminated, _, info = env.step(act(env))
        assert rewards[0, 2] == F32(0.125) + F32(-3.0) and rewards[0, 0] == F32(-0.25) + F32(2.0)
        assert info["active"][0, 2] and not terminated[0]


def test_end_of_game_bonus_only_for_runners_in_after_last_tags():
    env = make(episode_length=2)
    env.reset(seed=0)
    still(env)
    place(env, x=[5.0, 1.0, 6.0, 7.5, 9.5], speed=[0.0, 0.0, 0.0, 0.0, 0.0])
    _, rewards, terminated, *_ = env.step(act(env))
    assert rewards[0, 2:].tolist() == [0.125] * 3 and not terminated[0]  # no bonus before T
    place(env, x=[5.0, 1.0, 5.25, 7.5, 9.5])
    _, rewards, terminated, truncated, _ = env.step(act(env))
    assert rewards[0, 2] == F32(0.125) + F32(-3.0)  # tagged at the last step: no bonus
    assert rewards[0, 3:].tolist() == [0.125 + 5.0] * 2
    assert terminated[0] and not truncated[0] and env.state["t"][0] == 2


def test_terminates_at_episode_length_and_when_no_runner_left():
    env = make(episode_length=3, autoreset_mode="disabled")
    env.reset(seed=0)
    still(env)
    for expected in (False, False, True):
        _, _, terminated, truncated, _ = env.step(act(env))
        assert bool(terminated[0]) == expected and not truncated[0]
    env = make(num_runners=1, episode_length=50, autoreset_mode="disabled")
    env.reset(seed=0)
    place(
        env,
        x=[5.0, 1.0, 5.25],
        y=[5.0, 1.0, 5.0],
        speed=[0, 0, 0],
        acceleration=[0, 0, 0],
        active=[True] * 3,
    )
    _, _, terminated, *_ = env.step(act(env))
    assert terminated[0] and env.state["t"][0] == 1


# ------------------------------------------------------------------------------ observations
def test_full_observation_blocks_and_normalisers_by_hand():
    env = make(
        num_runners=1, grid_length=8.0, max_speed=2.0, episode_length=4
    )  # 2 taggers + 1 runner
    env.reset(seed=0)
    place(
        env,
        x=[1.0, 2.0, 5.0],
        y=[1.0, 3.0, 7.0],
        heading=[0.5, 1.0, 3.0],
        speed=[0.0, 0.0, 0.0],
        acceleration=[0.0, 0.0, 0.0],
        active=[True] * 3,
    )
    obs, *_ = env.step(act(env))
    assert env.obs_dim == 7 * 2 + 1
    row = obs[0, 0].numpy()  # agent 0 sees agents 1 and 2
    pos = F32(math.sqrt(2) * 8.0)
    np.testing.assert_array_equal(
        row,
        np.array(
            [
                F32(1.0) / pos,
                F32(4.0) / pos,  # block 0: dx
                F32(2.0) / pos,
                F32(6.0) / pos,  # block 1: dy
                0,
                0,
                0,
                0,  # blocks 2, 3: speed, acceleration
                F32(0.5) / TWO_PI,
                F32(2.5) / TWO_PI,  # block 4: raw heading difference / 2pi
                1,
                0,  # block 5: type
                1,
                1,  # block 6: in game
                F32(1) / F32(4),
            ],
            np.float32,
        ),
    )  # t / T
    row2 = obs[0, 2].numpy()  # the runner sees agents 0 and 1
    assert row2[0] == F32(-4.0) / pos and row2[1] == F32(-3.0) / pos
    assert row2[8] == F32(0.5 - 3.0) / TWO_PI and row2[10:12].tolist() == [1, 1]


def test_speed_and_acceleration_blocks_divide_by_max_speed():
    env = make(num_runners=1, max_speed=2.0, max_acceleration=0.5, episode_length=4)
    env.reset(seed=0)
    place(
        env,
        x=[1.0, 5.0, 9.0],
        y=[5.0, 5.0, 5.0],
        heading=[0.0, 0.0, 0.0],
        speed=[0.0, 0.0, 0.0],
        acceleration=[0.0, 0.0, 0.0],
        active=[True] * 3,
    )
    obs, *_ = env.step(act(env, {1: (3, 0)}))  # agent 1: acc 0.5, speed 0.5
    row = obs[0, 0].numpy()
    norm = F32(2.0 + 1e-10)
    assert row[4:6].tolist() == [F32(0.5) / norm, 0.0] and row[6:8].tolist() == [
        F32(0.5) / norm,
        0.0,
    ]


def test_partial_observation_order_ties_and_zero_padding():
    env = make(
        num_taggers=1, num_runners=4, use_full_observation=False, num_other_agents_observed=3
    )
    env.reset(seed=0)
    # Agent 0 at the centre; agents 3 and 1 at the same distance 1, agent 2 at 2; agent 4 out.
    place(
        env,
        x=[5.0, 6.0, 7.0, 4.0, 5.5],
        y=[5.0, 5.0, 5.0, 5.0, 5.0],
        heading=[0.0] * 5,
        speed=[0.0] * 5,
        acceleration=[0.0] * 5,
        active=[True, True, True, True, False],
    )
    obs, *_ = env.step(act(env))
    m, pos = 3, F32(math.sqrt(2) * 10.0)
    row = obs[0, 0].numpy()
    assert env.obs_dim == 7 * m + 1
    np.testing.assert_array_equal(
        row[0:3], np.array([1.0, -1.0, 2.0], np.float32) / pos
    )  # ids 1, 3, 2
    assert row[5 * m : 6 * m].tolist() == [0, 0, 0] and row[6 * m : 7 * m].tolist() == [1, 1, 1]
    row = obs[0, 2].numpy()  # agent 2 sees 1 (d=1), then 0 and... 3 (d=3): ids 1, 0, 3
    np.testing.assert_array_equal(row[0:3], np.array([-1.0, -2.0, -3.0], np.float32) / pos)
    assert row[5 * m : 6 * m].tolist() == [0, 1, 0]
    env2 = make(
        num_taggers=1, num_runners=2, use_full_observation=False, num_other_agents_observed=3
    )
    env2.reset(seed=0)
    place(
        env2,
        x=[5.0, 6.0, 7.0],
        y=[5.0] * 3,
        heading=[0.0] * 3,
        speed=[0.0] * 3,
        acceleration=[0.0] * 3,
        active=[True] * 3,
    )
    obs, *_ = env2.step(act(env2))
    row = obs[0, 0].numpy()  # k = N = 3 > N - 1: the last column is all zeros
    assert all(row[b * 3 + 2] == 0 for b in range(7)) and row[6 * 3 : 6 * 3 + 2].tolist() == [1, 1]


def test_observation_uses_flags_from_before_the_tags():
    env = make(num_taggers=1, num_runners=2, use_full_observation=True)
    env.reset(seed=0)
    place(
        env,
        x=[5.0, 5.25, 9.0],
        y=[5.0] * 3,
        heading=[0.0] * 3,
        speed=[0.0] * 3,
        acceleration=[0.0] * 3,
        active=[True] * 3,
    )
    obs, _, _, _, info = env.step(act(env))
    assert not info["active"][0, 1]  # tagged this step
    assert obs[0, 0, 6 * 2].item() == 1.0  # but still "in game" in this step's observation
    obs, *_ = env.step(act(env))
    assert obs[0, 0, 6 * 2].item() == 0.0


def test_out_of_game_observation_rules_and_observe_self():
    for full in (True, False):
        env = make(
            num_taggers=1,
            num_runners=2,
            use_full_observation=full,
            num_other_agents_observed=2,
            observe_self=True,
            episode_length=8,
        )
        env.reset(seed=0)
        place(
            env,
            x=[2.0, 4.0, 9.0],
            y=[3.0, 5.0, 5.0],
            heading=[1.0, 0.0, 2.0],
            speed=[0.0] * 3,
            acceleration=[0.0] * 3,
            active=[True, False, True],
        )
        obs, *_ = env.step(act(env))
        out, me = obs[0, 1].numpy(), obs[0, 0].numpy()
        assert env.obs_dim == 7 * 2 + 1 + 5
        if full:
            assert (
                (out[0:10] == 0).all()
                and out[10:12].tolist() == [1, 0]
                and out[12:14].tolist() == [1, 1]
            )
            assert out[14] == 0 and out[15:19].tolist() == [0, 0, 0, 0] and out[19] == 0  # runner
        else:
            assert (out == 0).all()
        self_block = me[15:20]
        expected = [F32(2.0) / F32(10.0), F32(3.0) / F32(10.0), 0.0, F32(1.0) / TWO_PI, 1.0]
        assert self_block.tolist() == expected
        assert me[14] == F32(1) / F32(8)
    env = make(num_taggers=1, num_runners=2, use_full_observation=True, observe_self=True)
    env.reset(seed=0)
    place(
        env,
        active=[False, True, True],
        x=[1.0, 5.0, 9.0],
        y=[5.0] * 3,
        speed=[0.0] * 3,
        acceleration=[0.0] * 3,
        heading=[0.0] * 3,
    )
    obs, *_ = env.step(act(env))
    assert obs[0, 0, -1] == 1.0 and (obs[0, 0, -5:-1] == 0).all()  # own type kept in full mode


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(use_full_observation=False, num_other_agents_observed=2, observe_self=True),
        dict(
            runner_exits_game_after_tagged=False,
            use_full_observation=False,
            num_other_agents_observed=5,
        ),
        dict(grid_length=3.0, tagging_distance=0.2, max_speed=0.7, skill_level_runner=1.3),
    ],
)
def test_matches_numpy_reference_over_random_episodes(overrides):
    base = dict(
        episode_length=12,
        grid_length=4.0,
        tagging_distance=0.12,
        max_acceleration=0.3,
        min_acceleration=-0.3,
        num_acceleration_levels=4,
        num_turn_levels=5,
        min_turn=-2.0,
        max_turn=2.0,
    )
    env = make(2, autoreset_mode="disabled", **{**base, **overrides})
    p, rng = env.params, np.random.default_rng(3)
    env.reset(seed=11)
    states = [snapshot(env, e) for e in range(2)]
    tags = 0
    for _ in range(40):
        actions = np.stack(
            [rng.integers(0, env.action_nvec, size=(env.num_agents, 2)) for _ in range(2)]
        )
        obs, rewards, terminated, _, _ = env.step(actions)
        for e in range(2):
            states[e], ref_obs, ref_rewards, ref_done = reference_step(states[e], actions[e], p)
            np.testing.assert_array_equal(obs[e].numpy(), ref_obs)
            np.testing.assert_array_equal(rewards[e].numpy(), ref_rewards)
            assert bool(terminated[e]) == ref_done
            for key, value in snapshot(env, e).items():
                np.testing.assert_array_equal(value, states[e][key], err_msg=key)
        tags += int(env.tag_count[:, p.num_taggers :].sum())
        if terminated.any():
            env.reset(options={"reset_mask": terminated})
            states = [snapshot(env, e) for e in range(2)]
    assert tags > 0


def test_seed_config_verbatim_and_reference_observation():
    env = TagEnv(3, "cpu", **SEED_CONFIG)
    assert env.obs_dim == 71 and env.action_nvec == (11, 11) and env.num_agents == 105
    assert env.agent_names[:2] == ["tagger_0", "tagger_1"] and env.agent_names[5] == "runner_0"
    assert env.taggers == [0, 1, 2, 3, 4] and env.runners[0] == 5 and len(env.runners) == 100
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(3):
        before = snapshot(env, 1)
        actions = rng.integers(0, 11, size=(3, 105, 2))
        obs, rewards, *_ = env.step(actions)
        _, ref_obs, ref_rewards, _ = reference_step(before, actions[1], env.params)
        np.testing.assert_array_equal(obs[1].numpy(), ref_obs)
        np.testing.assert_array_equal(rewards[1].numpy(), ref_rewards)
    assert env.team_view(obs, "runner").shape == (3, 100, 71)
    assert env.team_view(obs, "tagger").data_ptr() == obs.data_ptr()


def test_thousand_agents_on_cpu():
    env = TagEnv(
        2,
        "cpu",
        num_taggers=10,
        num_runners=990,
        grid_length=30.0,
        episode_length=5,
        use_full_observation=False,
        num_other_agents_observed=10,
    )
    env.reset(seed=1)
    actions = np.random.default_rng(0).integers(0, 11, size=(2, 1000, 2))
    obs, rewards, terminated, _, info = env.step(actions)
    assert obs.shape == (2, 1000, 71) and not terminated.any()
    s = snapshot(env, 1)
    before_tags = s["active"] | (env.tag_count[1].numpy() > 0)
    pos = F32(math.sqrt(2) * 30.0)
    for i in (0, 17, 500, 999):  # k nearest by (float32 d2, id), vectorised
        if not before_tags[i]:
            continue
        dx, dy = s["x"] - s["x"][i], s["y"] - s["y"][i]
        d2 = dx * dx + dy * dy
        ids = np.array(
            [j for j in np.lexsort((np.arange(1000), d2)) if j != i and before_tags[j]][:10]
        )
        np.testing.assert_array_equal(obs[1, i, :10].numpy(), dx[ids] / pos)
        np.testing.assert_array_equal(obs[1, i, 50:60].numpy(), (ids < 10).astype(np.float32))


# ------------------------------------------------------------------------------ resets and seeds
def test_start_state_draws():
    env = make(4, num_runners=30)
    env.reset(seed=3)
    s = env.state
    assert ((s["x"] >= 0) & (s["x"] < 10)).all() and ((s["y"] >= 0) & (s["y"] < 10)).all()
    quarter = np.array([0, math.pi / 2, math.pi, 3 * math.pi / 2], np.float32)
    assert np.isin(s["heading"].numpy(), quarter).all()
    assert len(np.unique(s["heading"].numpy())) == 4
    assert (s["speed"] == 0).all() and (s["acceleration"] == 0).all() and s["active"].all()
    assert (s["t"] == 0).all()


def test_random_reset_mode_is_independent_of_num_envs_and_fresh_per_episode():
    small, big = make(2), make(5)
    small.reset(seed=9)
    big.reset(seed=9)
    for key in ("x", "y", "heading"):
        assert torch.equal(small.state[key], big.state[key][:2])
    assert not torch.equal(big.state["x"][0], big.state["x"][1])
    first = big.state["x"].clone()
    big.reset()  # next episode of each stream
    assert not torch.equal(first, big.state["x"])
    big.reset(seed=9)
    assert torch.equal(first, big.state["x"])


def test_fixed_reset_mode_reuses_one_start_state():
    env = make(3, reset_mode="fixed", seed=4)
    env.reset()
    first = {k: env.state[k].clone() for k in ("x", "y", "heading")}
    for value in first.values():
        assert (value == value[0]).all()
    env.reset()
    for key, value in first.items():
        assert torch.equal(env.state[key], value)
    reference = make(1, reset_mode="random")
    reference.reset(seed=4)
    assert torch.equal(reference.state["x"][0], first["x"][0])  # stream 4, episode 0
    env.reset(seed=5)
    assert not torch.equal(env.state["x"], first["x"])


def test_starting_locations_replace_the_draws():
    xs, ys, ds = [1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 10.0, 2.5, 2.5, 2.5], [0.0, 1.0, 2.0, 3.0, 6.0]
    env = make(2, starting_location_x=xs, starting_location_y=ys, starting_directions=ds)
    env.reset(seed=0)
    assert env.state["x"][1].tolist() == xs and env.state["y"][0].tolist() == ys
    assert env.state["heading"][1].numpy().tolist() == np.array(ds, np.float32).tolist()
    only_x = make(2, starting_location_x=xs)
    only_x.reset(seed=0)
    assert only_x.state["x"][0].tolist() == xs and not torch.equal(
        only_x.state["y"][0], only_x.state["y"][1]
    )


def test_seed_parameter_seeds_the_first_reset_only_this_env():
    state = np.random.get_state()
    torch_state = torch.random.get_rng_state()
    a, b = make(2, seed=21), make(2, seed=21)
    a.reset()
    b.reset()
    assert torch.equal(a.state["x"], b.state["x"])
    assert (np.random.get_state()[1] == state[1]).all() and torch.equal(
        torch.random.get_rng_state(), torch_state
    )


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(num_taggers=0), "num_taggers"),
        (dict(num_runners=1.5), "num_runners"),
        (dict(grid_length=0.0), "grid_length"),
        (dict(grid_length=float("nan")), "grid_length"),
        (dict(episode_length=0), "episode_length"),
        (dict(max_speed=-1.0), "max_speed"),
        (dict(skill_level_tagger=0.0), "skill_level_tagger"),
        (dict(skill_level_runner=-2), "skill_level_runner"),
        (dict(min_acceleration=0.5, max_acceleration=0.1), "min_acceleration"),
        (dict(min_turn=1.0, max_turn=0.0), "min_turn"),
        (dict(num_acceleration_levels=-1), "num_acceleration_levels"),
        (dict(num_turn_levels=True), "num_turn_levels"),
        (dict(edge_hit_penalty=0.5), "edge_hit_penalty"),
        (dict(use_full_observation=1), "use_full_observation"),
        (dict(num_other_agents_observed=0), "num_other_agents_observed"),
        (dict(num_other_agents_observed=6), "num_other_agents_observed"),
        (dict(tagging_distance=1.5), "tagging_distance"),
        (dict(tagging_distance=-0.1), "tagging_distance"),
        (dict(tag_reward_for_tagger=-1.0), "tag_reward_for_tagger"),
        (dict(step_penalty_for_tagger=0.1), "step_penalty_for_tagger"),
        (dict(tag_penalty_for_runner=1.0), "tag_penalty_for_runner"),
        (dict(step_reward_for_runner=-0.1), "step_reward_for_runner"),
        (dict(end_of_game_reward_for_runner=-1.0), "end_of_game_reward_for_runner"),
        (dict(runner_exits_game_after_tagged="yes"), "runner_exits_game_after_tagged"),
        (dict(starting_location_x=[1.0, 2.0]), "starting_location_x"),
        (dict(starting_location_y=[1.0, 2.0, 3.0, 4.0, 11.0]), "starting_location_y"),
        (dict(starting_directions=[0.0, 0.0, 0.0, 0.0, 7.0]), "starting_directions"),
        (dict(seed=-1), "seed"),
        (dict(reset_mode="sometimes"), "reset_mode"),
        (dict(observe_self=None), "observe_self"),
    ],
)
def test_bad_parameters_raise_naming_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make(**kwargs)


def test_params_are_a_frozen_dataclass_with_spec_defaults():
    p = TagParams()
    assert (p.num_taggers, p.num_runners, p.grid_length, p.episode_length) == (1, 10, 10.0, 100)
    assert (
        p.max_turn == pytest.approx(math.pi / 2)
        and p.tagging_distance == 0.01
        and p.reset_mode == "random"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.num_taggers = 3
    with pytest.raises(TypeError):
        TagEnv(1, "cpu", no_such_parameter=1)


def test_bad_actions_raise_before_any_kernel_runs():
    env = make(2)
    env.reset(seed=0)
    before = env.state["x"].clone()
    good = np.zeros((2, 5, 2), np.int64)
    for bad, error in [
        (good[:, :4], ValueError),
        (good.astype(np.float32), TypeError),
        (good.astype(bool), TypeError),
        (good - 1, ValueError),
    ]:
        with pytest.raises(error):
            env.step(bad)
    too_big = good.copy()
    too_big[1, 3, 1] = 4  # turn index 0..3
    with pytest.raises(ValueError, match="out of range"):
        env.step(too_big)
    assert torch.equal(env.state["x"], before) and (env.state["t"] == 0).all()


def test_out_of_range_action_without_validation_is_reported():
    env = make(1, validate_actions=False)
    env.reset(seed=0)
    actions = np.zeros((1, 5, 2), np.int64)
    actions[0, 2, 0] = 99
    with pytest.raises(ValueError, match="validate_actions=False"):
        env.step(actions)
    assert not env.action_error.any()
    env.step(np.zeros((1, 5, 2), np.int64))


# ------------------------------------------------------------------------------ autoreset
def finish_in_one_step(env, e=0):
    """Leave one runner in env ``e``, next to tagger 0: the game ends at the next step."""
    n = env.num_agents
    x = [1.0 + 2.0 * i for i in range(n)]
    x[env.num_taggers] = x[0] + 0.25
    for key, row in dict(
        x=x, y=[5.0] * n, speed=[0.0] * n, acceleration=[0.0] * n, heading=[0.0] * n
    ).items():
        env.state[key][e] = torch.tensor(row)
    env.state["active"][e] = torch.tensor([i <= env.num_taggers for i in range(n)])


def test_autoreset_next_step():
    env = make(2, autoreset_mode="next_step")
    env.reset(seed=0)
    finish_in_one_step(env, 1)
    episode_start = env.state["x"][0].clone()
    _, rewards, terminated, _, info = env.step(act_batch(env))
    assert terminated.tolist() == [False, True] and rewards[1, 0] == F32(-0.25) + F32(2.0)
    obs, rewards, terminated, truncated, info = env.step(act_batch(env, value=3))
    assert terminated.tolist() == [False, False] and (rewards[1] == 0).all() and not truncated.any()
    assert env.state["t"].tolist() == [2, 0] and info["active"][1].all()
    assert (env.state["speed"][1] == 0).all()  # its actions were ignored
    assert not torch.equal(env.state["x"][0], episode_start)


def test_autoreset_same_step():
    env = make(2, autoreset_mode="same_step")
    env.reset(seed=0)
    finish_in_one_step(env, 1)
    obs, rewards, terminated, _, info = env.step(act_batch(env))
    assert terminated.tolist() == [False, True] and info["_final_obs"].tolist() == [False, True]
    assert info["final_active"][1].tolist() == [True, True, False, False, False]
    assert env.state["t"].tolist() == [1, 0] and info["active"][1].all()
    assert torch.equal(obs[1], env._tensors.obs[1])
    assert not torch.equal(info["final_obs"][1], obs[1]) and rewards[1, 2] == F32(0.125) + F32(-3.0)


def test_autoreset_disabled():
    env = make(2, autoreset_mode="disabled")
    env.reset(seed=0)
    finish_in_one_step(env, 0)
    _, _, terminated, _, _ = env.step(act_batch(env))
    assert terminated.tolist() == [True, False]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(act_batch(env))
    obs, info = env.reset(options={"reset_mask": torch.tensor([True, False])})
    assert env.state["t"].tolist() == [0, 1] and info["active"].all()
    env.step(act_batch(env))
    with pytest.raises(RuntimeError, match="before step"):
        make().step(act(make()))


def act_batch(env, value=0):
    return np.full((env.num_envs, env.num_agents, 2), value, np.int64)


# ------------------------------------------------------------------------------ determinism, misc
def _trajectory_digest(threads: int) -> str:
    numba.set_num_threads(threads)
    try:
        env = TagEnv(
            6,
            "cpu",
            num_taggers=3,
            num_runners=20,
            grid_length=6.0,
            episode_length=15,
            use_full_observation=False,
            num_other_agents_observed=4,
            tagging_distance=0.05,
        )
        env.reset(seed=2)
        rng, digest = np.random.default_rng(0), hashlib.sha256()
        for _ in range(40):
            obs, rewards, terminated, _, _ = env.step(rng.integers(0, 11, size=(6, 23, 2)))
            for t in (obs, rewards, terminated):
                digest.update(t.numpy().tobytes())
        return digest.hexdigest()
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs NUMBA_NUM_THREADS >= 2")
def test_one_and_two_numba_threads_give_identical_results():
    # numba.set_num_threads changes the threads of the parallel driver at run time, as
    # NUMBA_NUM_THREADS=1 vs 2 would in two processes (without paying two torch imports).
    assert _trajectory_digest(1) == _trajectory_digest(2)


def test_fetch_episode_states_records_one_game():
    env = make(3, episode_length=6)
    episode = env.fetch_episode_states(seed=1)
    steps = episode["rewards"].shape[0]
    assert 1 <= steps <= 6
    for key in ("x", "y", "heading", "speed", "acceleration", "active"):
        assert episode[key].shape == (steps + 1, 5)
    assert episode["actions"].shape == (steps, 5, 2) and episode["t"].tolist() == list(
        range(steps + 1)
    )
    again = env.fetch_episode_states(seed=1)
    np.testing.assert_array_equal(episode["x"], again["x"])
    assert episode["num_taggers"] == 2 and episode["episode_length"] == 6


def test_outputs_are_fresh_tensors_and_state_is_live():
    env = make(2)
    obs, _ = env.reset(seed=0)
    obs2, rewards, *_ = env.step(act_batch(env))
    assert obs2.data_ptr() != env._tensors.obs.data_ptr() and obs2.dtype == torch.float32
    assert rewards.shape == (2, 5) and obs2.shape == (2, 5, env.obs_dim)
    assert set(env.state) == {"x", "y", "heading", "speed", "acceleration", "active", "t"}
    assert env.state["t"].dtype == torch.int32 and env.active.dtype == torch.bool
