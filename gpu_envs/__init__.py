"""gpu-envs: batched RL environments whose step runs as Numba kernels on the CPU or a CUDA GPU."""

from gymnasium.envs.registration import register, registry

from gpu_envs.cartpole import CartPoleEnv, CartPoleVectorEnv
from gpu_envs.wrappers import RecordEpisodeStatistics

__all__ = ["CartPoleEnv", "CartPoleVectorEnv", "RecordEpisodeStatistics"]
__version__ = "0.1.0"

if "gpu_envs/CartPole-v1" not in registry:
    register(
        id="gpu_envs/CartPole-v1",
        entry_point="gpu_envs.cartpole:CartPoleEnv",
        vector_entry_point="gpu_envs.cartpole:CartPoleVectorEnv",
        max_episode_steps=500,
        reward_threshold=475.0,
    )
