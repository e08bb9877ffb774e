"""gpu-envs: batched RL environments whose step runs as Numba kernels on the CPU or a CUDA GPU."""

from gymnasium.envs.registration import register, registry

from gpu_envs import tag_v0
from gpu_envs.cartpole import CartPoleEnv, CartPoleVectorEnv
from gpu_envs.pendulum import PendulumEnv, PendulumVectorEnv
from gpu_envs.tag import TagEnv, TagVectorEnv
from gpu_envs.wrappers import RecordEpisodeStatistics

__all__ = [
    "CartPoleEnv",
    "CartPoleVectorEnv",
    "PendulumEnv",
    "PendulumVectorEnv",
    "RecordEpisodeStatistics",
    "TagEnv",
    "TagVectorEnv",
    "tag_v0",
]
__version__ = "0.1.0"

if "gpu_envs/CartPole-v1" not in registry:
    register(
        id="gpu_envs/CartPole-v1",
        entry_point="gpu_envs.cartpole:CartPoleEnv",
        vector_entry_point="gpu_envs.cartpole:CartPoleVectorEnv",
        max_episode_steps=500,
        reward_threshold=475.0,
    )

if "gpu_envs/Pendulum-v1" not in registry:
    register(
        id="gpu_envs/Pendulum-v1",
        entry_point="gpu_envs.pendulum:PendulumEnv",
        vector_entry_point="gpu_envs.pendulum:PendulumVectorEnv",
        max_episode_steps=200,
    )

for _id, _module, _single, _vector, _steps, _threshold in (
    ("Acrobot-v1", "acrobot", "AcrobotEnv", "AcrobotVectorEnv", 500, -100.0),
    ("MountainCar-v0", "mountain_car", "MountainCarEnv", "MountainCarVectorEnv", 200, -110.0),
    (
        "MountainCarContinuous-v0",
        "mountain_car",
        "MountainCarContinuousEnv",
        "MountainCarContinuousVectorEnv",
        999,
        90.0,
    ),
):
    if f"gpu_envs/{_id}" not in registry:
        register(
            id=f"gpu_envs/{_id}",
            entry_point=f"gpu_envs.{_module}:{_single}",
            vector_entry_point=f"gpu_envs.{_module}:{_vector}",
            max_episode_steps=_steps,
            reward_threshold=_threshold,
        )

# Tag: rows are (game, agent) pairs; gym.make_vec only (one row is not a game, so gym.make raises an
# error naming gym.make_vec("gpu_envs/Tag-v0", num_envs=GAMES, ...) and
# gpu_envs.tag_v0.parallel_env).
if "gpu_envs/Tag-v0" not in registry:
    register(
        id="gpu_envs/Tag-v0",
        entry_point="gpu_envs.tag_gym:single_env_unavailable",
        vector_entry_point="gpu_envs.tag_gym:TagGymVectorEnv",
    )
