"""The PettingZoo face of Tag: PettingZoo's own API and seed tests, agents leaving, global state."""

import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

from gpu_envs import tag_v0

# Big tagging distance in a small arena: runners are tagged and leave during the API tests.
SMALL = dict(
    num_taggers=2,
    num_runners=5,
    grid_length=2.0,
    episode_length=40,
    tagging_distance=0.15,
    num_acceleration_levels=3,
    num_turn_levels=4,
)
# Tagger 0 sits on runner_0; runner_1 far away; nobody moves with action (0, 0).
PLACED = dict(
    num_taggers=1,
    num_runners=2,
    grid_length=10.0,
    episode_length=3,
    starting_location_x=[5.0, 5.0, 9.0],
    starting_location_y=[5.0, 5.0, 1.0],
    starting_directions=[0.0, 0.0, 0.0],
)
STILL = np.array([0, 0])


def test_parallel_api_test_passes_and_runners_leave():
    env = tag_v0.parallel_env(**SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PettingZoo reports API problems as warnings
        parallel_api_test(env, num_cycles=60)


def test_parallel_seed_test_passes():
    parallel_seed_test(lambda: tag_v0.parallel_env(**SMALL), num_cycles=30)


def test_aec_conversion_passes_api_and_seed_tests():
    api_test(tag_v0.env(**SMALL), num_cycles=20)
    seed_test(lambda: tag_v0.env(**SMALL), num_cycles=10)
    assert tag_v0.raw_env(**SMALL).metadata["name"] == "tag_v0"


def test_agents_spaces_and_metadata():
    env = tag_v0.parallel_env(**SMALL)
    assert env.possible_agents == ["tagger_0", "tagger_1"] + [f"runner_{i}" for i in range(5)]
    assert env.metadata["name"] == "tag_v0" and "rgb_array" in env.metadata["render_modes"]
    for agent in env.possible_agents:
        assert env.action_space(agent) is env.action_space(agent)
        assert env.observation_space(agent) is env.observation_space(agent)
        assert list(env.action_space(agent).nvec) == [4, 5]
        assert env.observation_space(agent).shape == (7 * 6 + 1,)  # full observation of N-1 others
    assert env.action_space("tagger_0") is not env.action_space("tagger_1")  # seeded one by one


def test_tagged_runner_reports_its_last_step_then_leaves():
    env = tag_v0.parallel_env(**PLACED)
    obs, infos = env.reset(seed=0)
    assert set(obs) == set(infos) == {"tagger_0", "runner_0", "runner_1"}
    obs, rewards, terminations, truncations, infos = env.step({a: STILL for a in env.agents})
    assert set(obs) == set(rewards) == set(terminations) == {"tagger_0", "runner_0", "runner_1"}
    assert terminations == {"tagger_0": False, "runner_0": True, "runner_1": False}
    assert rewards == {"tagger_0": 1.0, "runner_0": -1.0, "runner_1": 0.0}
    assert not any(truncations.values())
    assert env.agents == ["tagger_0", "runner_1"]
    obs, _, _, _, _ = env.step({a: STILL for a in env.agents})
    assert set(obs) == {"tagger_0", "runner_1"}
    # runner_1 sees its 2 others (tagger_0, runner_0) block by block: type block 5, in-game block 6.
    assert obs["runner_1"][5 * 2 + 0] == 1.0 and obs["runner_1"][6 * 2 + 1] == 0.0
    obs, rewards, terminations, _, _ = env.step({a: STILL for a in env.agents})
    assert terminations == {"tagger_0": True, "runner_1": True}  # t == T ends the game
    assert rewards["runner_1"] == 1.0  # end-of-game reward
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_bad_actions_are_rejected_by_name():
    env = tag_v0.parallel_env(**PLACED)
    env.reset(seed=0)
    everyone = {a: STILL for a in env.agents}
    with pytest.raises(ValueError, match="no action for runner_1"):
        env.step({k: v for k, v in everyone.items() if k != "runner_1"})
    with pytest.raises(ValueError, match="runner_0"):
        env.step({**everyone, "runner_0": np.array([0, 99])})
    with pytest.raises(ValueError, match="not in the game"):
        env.step({**everyone, "ghost": STILL})
    for not_integers in (np.array([True, True]), np.array([1.0, 0.0]), [True, False]):
        with pytest.raises(ValueError, match="runner_0 must be 2 integers"):
            env.step({**everyone, "runner_0": not_integers})
    env.step(everyone)  # runner_0 leaves
    with pytest.raises(ValueError, match=r"not in the game: \['runner_0'\]"):
        env.step({**{a: STILL for a in env.agents}, "runner_0": STILL})


def test_single_game_only_arguments_are_refused():
    with pytest.raises(TypeError, match="vector_env"):
        tag_v0.parallel_env(num_envs=4)


def test_global_state_layout():
    env = tag_v0.parallel_env(**PLACED)
    env.reset(seed=0)
    state = env.state()
    assert env.state_space.shape == state.shape == (7 * 3 + 1,) and state.dtype == np.float32
    per_agent = state[:-1].reshape(3, 7)
    np.testing.assert_allclose(per_agent[:, 0], [0.5, 0.5, 0.9], rtol=1e-6)  # x / L
    np.testing.assert_allclose(per_agent[:, 1], [0.5, 0.5, 0.1], rtol=1e-6)  # y / L
    assert list(per_agent[:, 5]) == [1.0, 0.0, 0.0] and list(per_agent[:, 6]) == [1.0, 1.0, 1.0]
    assert state[-1] == 0.0
    env.step({a: STILL for a in env.agents})
    state = env.state()
    assert list(state[:-1].reshape(3, 7)[:, 6]) == [1.0, 0.0, 1.0]
    assert state[-1] == pytest.approx(1 / 3)


def test_render_and_vector_env():
    env = tag_v0.parallel_env(render_mode="rgb_array", **PLACED)
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert tag_v0.parallel_env(**PLACED).render() is None
    batch = tag_v0.vector_env(3, "cpu", num_taggers=1, num_runners=2)
    assert batch.num_envs == 3 and batch.num_agents == 3
