"""The gymnasium face of Tag: rows are (game, agent) pairs for parameter-sharing libraries."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_envs  # noqa: F401  (registers gpu_envs/Tag-v0)
from gpu_envs.games.tag.gym_vector import TagGymVectorEnv

# In every game: tagger 0 on top of runner 0 (tagged on step 1), runner 1 far away, nobody moves.
PLACED = dict(
    num_taggers=1,
    num_runners=2,
    grid_length=10.0,
    episode_length=3,
    starting_location_x=[5.0, 5.0, 9.0],
    starting_location_y=[5.0, 5.0, 1.0],
    starting_directions=[0.0, 0.0, 0.0],
)
GAMES, AGENTS = 2, 3


def still(env) -> torch.Tensor:
    return torch.zeros((env.num_envs, 2), dtype=torch.int64)


def test_make_vec_rows_spaces_and_roles():
    env = gym.make_vec("gpu_envs/Tag-v0", num_envs=GAMES, device="cpu", **PLACED)
    assert isinstance(env, TagGymVectorEnv) and isinstance(env, gym.vector.VectorEnv)
    assert (env.num_envs, env.num_games, env.num_agents) == (GAMES * AGENTS, GAMES, AGENTS)
    obs_dim = 7 * (AGENTS - 1) + 1 + 5  # full observation + observe_self
    assert env.single_observation_space.shape == (obs_dim,)
    assert list(env.single_action_space.nvec) == [11, 11]
    assert env.action_space.shape == (GAMES * AGENTS, 2)
    obs, info = env.reset(seed=4)
    assert (
        isinstance(obs, torch.Tensor)
        and obs.shape == (GAMES * AGENTS, obs_dim)
        and obs.dtype == torch.float32
    )
    # observe_self's last value is the role: rows 0 and 3 are the taggers of games 0 and 1.
    assert obs[:, -1].tolist() == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert info["active"].all()


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_tag_exit_dead_rows_and_game_end(mode):
    env = TagGymVectorEnv(GAMES, "cpu", autoreset_mode=mode, **PLACED)
    env.reset(seed=0)
    obs, rewards, terminated, truncated, info = env.step(still(env))
    assert rewards.tolist() == [1.0, -1.0, 0.0] * GAMES
    assert terminated.tolist() == [False, True, False] * GAMES  # runner_0 tagged and exits
    assert not truncated.any() and not info["dead"].any()
    assert info["active"].tolist() == [True, False, True] * GAMES
    obs, rewards, terminated, truncated, info = env.step(still(env))  # runner_0's rows are dead now
    assert info["dead"].tolist() == [False, True, False] * GAMES
    assert rewards.tolist() == [0.0] * (GAMES * AGENTS) and not terminated.any()
    obs, rewards, terminated, truncated, info = env.step(still(env))  # t == T
    assert terminated.tolist() == [True, False, True] * GAMES  # dead rows do not end a second time
    assert rewards.tolist() == [0.0, 0.0, 1.0] * GAMES  # end-of-game reward for the runner left
    if mode == "same_step":
        assert info["_final_obs"].tolist() == [True, False, True] * GAMES
        assert info["final_obs"].shape == obs.shape
        assert info["active"].all()  # the new games started in this step
    else:
        obs, rewards, terminated, truncated, info = env.step(still(env))  # the reset step
        assert not terminated.any() and not rewards.any()
        assert info["active"].all() and info["dead"].tolist() == [False, True, False] * GAMES


def test_actions_one_per_row():
    env = TagGymVectorEnv(GAMES, "cpu", **PLACED)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="one \\(acceleration index, turn index\\) per row"):
        env.step(torch.zeros((GAMES, AGENTS, 2), dtype=torch.int64))
    with pytest.raises(ValueError):
        env.step(torch.full((GAMES * AGENTS, 2), 11, dtype=torch.int64))
    # Different actions per row move the agents of one game independently.
    actions = still(env)
    actions[2] = torch.tensor([10, 0])  # runner_1 of game 0 accelerates
    env.step(actions)
    speed = env.game_env.state["speed"]
    assert speed[0, 2] > 0 and speed[1, 2] == 0 and speed[0, 0] == 0


def test_observe_self_is_forced():
    with pytest.raises(ValueError, match="observe_self"):
        TagGymVectorEnv(1, "cpu", observe_self=False)
    assert TagGymVectorEnv(1, "cpu", observe_self=True, num_taggers=1, num_runners=1).num_envs == 2


def test_seeded_resets_repeat_and_games_differ():
    a = TagGymVectorEnv(GAMES, "cpu", num_taggers=1, num_runners=2)
    b = TagGymVectorEnv(GAMES, "cpu", num_taggers=1, num_runners=2)
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=7)
    assert torch.equal(obs_a, obs_b)
    assert not torch.equal(obs_a[:AGENTS, :-1], obs_a[AGENTS:, :-1])  # game 1 seeded with 8


def test_render_gives_one_frame_per_game():
    env = TagGymVectorEnv(GAMES, "cpu", render_mode="rgb_array", num_taggers=1, num_runners=2)
    env.reset(seed=0)
    frames = env.render()
    assert len(frames) == GAMES and frames[0].dtype == np.uint8
