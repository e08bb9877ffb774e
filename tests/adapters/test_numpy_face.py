"""``gym.make_vec(..., array="numpy")``: a gymnasium VectorEnv of NumPy arrays that gymnasium's own
vector wrappers and an unchanged CleanRL loop take directly, with the torch face's values."""

import inspect
import warnings

import gymnasium as gym
import gymnasium.wrappers.vector as V
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

import gpu_envs  # noqa: F401  (registers the ids)
from gpu_envs.engine.numpy_face import NumpyArrays

TAG = dict(num_taggers=1, num_runners=2, episode_length=12)
#: (id, make_vec keywords) of the vector faces: CartPole, Pendulum, Tag's (game, agent) rows.
FACES = {
    "cartpole": ("gpu_envs/CartPole-v1", {"max_episode_steps": 20}),
    "pendulum": ("gpu_envs/Pendulum-v1", {"max_episode_steps": 15}),
    "tag": ("gpu_envs/Tag-v0", TAG),
}
WRAPPERS = {
    "NormalizeObservation": V.NormalizeObservation,
    "NormalizeReward": V.NormalizeReward,
    "RecordEpisodeStatistics": V.RecordEpisodeStatistics,
    "FlattenObservation": V.FlattenObservation,
    "DtypeObservation": lambda env: V.DtypeObservation(env, np.float64),
}


def make(face: str, array: str = "numpy", num_envs: int = 4, **kwargs):
    env_id, face_kwargs = FACES[face]
    return gym.make_vec(
        env_id, num_envs=num_envs, device="cpu", array=array, **{**face_kwargs, **kwargs}
    )


def actions_for(env, steps: int, seed: int = 0) -> list[np.ndarray]:
    env.action_space.seed(seed)
    return [env.action_space.sample() for _ in range(steps)]


@pytest.mark.parametrize("face", sorted(FACES))
def test_numpy_face_is_a_vector_env_with_the_torch_face_values(face):
    numpy_env, torch_env = make(face), make(face, array="torch")
    assert isinstance(numpy_env, VectorEnv) and isinstance(numpy_env, NumpyArrays)
    assert numpy_env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert numpy_env.num_envs == torch_env.num_envs
    for name in ("single_observation_space", "single_action_space", "observation_space"):
        assert getattr(numpy_env, name) == getattr(torch_env, name)
    assert numpy_env.spec.kwargs["array"] == "numpy"

    got = [numpy_env.reset(seed=3)[0]]
    want = [torch_env.reset(seed=3)[0]]
    for action in actions_for(numpy_env, 30):
        got.append(numpy_env.step(action))
        want.append(torch_env.step(torch.as_tensor(action)))
    for g, w in zip(got[1:], want[1:]):
        for g_array, w_tensor in zip(g[:4], w[:4]):
            assert isinstance(g_array, np.ndarray)
            assert g_array.dtype == w_tensor.numpy().dtype
            np.testing.assert_array_equal(g_array, w_tensor.numpy())
        assert set(g[4]) == set(w[4])
        assert all(isinstance(v, np.ndarray) for v in g[4].values())
    assert numpy_env.observation_space.contains(got[-1][0])


def test_outputs_held_by_the_caller_are_not_overwritten_by_the_next_step():
    env = make("cartpole")
    obs, _ = env.reset(seed=0)
    held = [obs, *env.step(np.ones(4, dtype=np.int64))[:4]]
    copies = [array.copy() for array in held]
    for _ in range(5):
        env.step(np.zeros(4, dtype=np.int64))
    for array, copy in zip(held, copies):
        np.testing.assert_array_equal(array, copy)


def test_same_step_final_observations_are_numpy():
    env = make("cartpole", autoreset_mode=AutoresetMode.SAME_STEP, max_episode_steps=3)
    env.reset(seed=0)
    for _ in range(3):
        *_, truncated, info = env.step(np.zeros(4, dtype=np.int64))
    assert truncated.all() and info["_final_obs"].all()
    assert isinstance(info["final_obs"], np.ndarray) and info["final_obs"].shape == (4, 4)


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("face", sorted(FACES))
def test_gymnasium_wrapper_runs_directly_on_the_numpy_face(face, wrapper):
    env = WRAPPERS[wrapper](make(face))
    obs, _ = env.reset(seed=0)
    for action in actions_for(env, 40):
        obs, rewards, terminated, truncated, info = env.step(action)
        for array in (obs, rewards, terminated, truncated):
            assert isinstance(array, np.ndarray) and array.shape[0] == env.num_envs
            assert np.isfinite(array).all()
    assert env.observation_space.contains(obs.astype(env.observation_space.dtype))


@pytest.mark.parametrize("face", ["cartpole", "pendulum"])
def test_record_episode_statistics_counts_the_episodes(face):
    horizon = FACES[face][1]["max_episode_steps"]
    env = V.RecordEpisodeStatistics(make(face))
    env.reset(seed=0)
    rewards_sum, episodes = np.zeros(4), []
    for action in actions_for(env, 2 * horizon + 1):
        _, rewards, terminated, truncated, info = env.step(action)
        rewards_sum += rewards
        if "episode" in info:
            ended = info["_episode"]
            np.testing.assert_allclose(info["episode"]["r"][ended], rewards_sum[ended], rtol=1e-5)
            episodes.extend(info["episode"]["l"][ended])
            rewards_sum[ended] = 0
    assert episodes and all(length <= horizon for length in episodes)


def test_normalize_observation_statistics_are_gymnasiums():
    env = V.NormalizeObservation(make("pendulum"))
    env.reset(seed=0)
    raw = make("pendulum")
    seen = [raw.reset(seed=0)[0]]
    for action in actions_for(env, 25):
        env.step(action)
        seen.append(raw.step(action)[0])
    seen = np.concatenate(seen)
    np.testing.assert_allclose(env.obs_rms.mean, seen.mean(axis=0), rtol=1e-4, atol=1e-6)


def test_cleanrl_loop_runs_without_a_warning():
    """The body of CleanRL's ppo.py rollout (NumPy in and out of the env, torch for the agent),
    only the env line changed; any warning fails."""
    num_envs, num_steps = 4, 64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        envs = gym.make_vec("gpu_envs/CartPole-v1", num_envs=num_envs, array="numpy")
        envs = V.RecordEpisodeStatistics(envs)
        assert isinstance(envs.single_action_space, gym.spaces.Discrete)
        agent = torch.nn.Linear(int(np.array(envs.single_observation_space.shape).prod()), 2)
        obs = torch.zeros((num_steps, num_envs) + envs.single_observation_space.shape)
        rewards = torch.zeros((num_steps, num_envs))
        next_obs, _ = envs.reset(seed=1)
        next_obs = torch.Tensor(next_obs)
        next_done = torch.zeros(num_envs)
        returns = []
        for step in range(num_steps):
            obs[step] = next_obs
            with torch.no_grad():
                action = torch.distributions.Categorical(logits=agent(next_obs)).sample()
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(next_obs), torch.Tensor(next_done)
            if "episode" in infos:
                returns.extend(infos["episode"]["r"][infos["_episode"]])
    assert returns and all(r >= 1 for r in returns)
    assert rewards.sum() > 0 and next_done.shape == (num_envs,)


def test_array_values_are_checked():
    with pytest.raises(ValueError, match=r"array must be one of \('torch', 'numpy'\).*'jax'"):
        gym.make_vec("gpu_envs/CartPole-v1", num_envs=2, array="jax")
    with pytest.raises(ValueError, match="array must be one of"):
        gym.make_vec("gpu_envs/CartPole-v1", num_envs=2, array=np)


def test_numpy_face_refuses_an_env_off_the_cpu():
    env = gym.make_vec("gpu_envs/CartPole-v1", num_envs=2)
    env.device = torch.device("cuda", 0)  # as an env built on a GPU reports it
    with pytest.raises(ValueError, match="array='numpy' hands out host arrays.*device='cpu'"):
        NumpyArrays(env)


def test_bad_actions_get_the_envs_errors():
    env = make("cartpole")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="out of range"):
        env.step(np.array([0, 1, 2, 0]))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3, dtype=np.int64))


def test_an_engine_env_class_takes_array_itself():
    """``array`` is a keyword of every engine env's class (what a user's game registered with its
    class as ``vector_entry_point`` gets from ``gym.make_vec``): ``"numpy"`` gives the NumPy face
    of the env, ``"torch"`` the env; a batched env that is no gymnasium ``VectorEnv`` (``TagEnv``)
    is refused with what to do, and a bad value names the choices."""
    from gpu_envs.games.cartpole import CartPoleVectorEnv
    from gpu_envs.games.tag.env import TagEnv

    numpy_env = CartPoleVectorEnv(3, array="numpy")
    assert isinstance(numpy_env, NumpyArrays) and type(numpy_env.unwrapped) is CartPoleVectorEnv
    assert isinstance(numpy_env.reset(seed=0)[0], np.ndarray)
    assert type(CartPoleVectorEnv(3, array="torch")) is CartPoleVectorEnv
    assert "array" in inspect.signature(CartPoleVectorEnv).parameters
    with pytest.raises(TypeError, match="not one: leave array out"):
        TagEnv(2, num_taggers=1, num_runners=2, array="numpy")
    with pytest.raises(ValueError, match=r"array must be one of \('torch', 'numpy'\).*'jax'"):
        CartPoleVectorEnv(3, array="jax")
