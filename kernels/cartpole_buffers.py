"""The arrays a batch of CartPole envs lives in, shared by every driver."""

from typing import Any, NamedTuple

import numpy as np


class CartPoleBuffers(NamedTuple):
    """Per-env state and step outputs. Arrays are NumPy (CPU) or device arrays (CUDA)."""

    state: Any          # [n, 4] float32/float64: x, x_dot, theta, theta_dot
    elapsed: Any        # [n] int32: steps since the episode started
    needs_reset: Any    # [n] bool: the env finished and has not been reset yet
    episode: Any        # [n] uint64: episodes started since seeding (RNG counter)
    env_seed: Any       # [n] uint64: RNG stream of each env
    obs: Any            # [n, 4] float32
    rewards: Any        # [n] float32
    terminated: Any     # [n] bool
    truncated: Any      # [n] bool
    final_obs: Any      # [n, 4] float32: last observation of episodes that ended (SAME_STEP)
    has_final_obs: Any  # [n] bool


def allocate_numpy(num_envs: int, dtype) -> CartPoleBuffers:
    """Zeroed NumPy buffers (for tests and the CUDA simulator)."""
    return CartPoleBuffers(
        state=np.zeros((num_envs, 4), dtype), elapsed=np.zeros(num_envs, np.int32),
        needs_reset=np.zeros(num_envs, np.bool_), episode=np.zeros(num_envs, np.uint64),
        env_seed=np.zeros(num_envs, np.uint64), obs=np.zeros((num_envs, 4), np.float32),
        rewards=np.zeros(num_envs, np.float32), terminated=np.zeros(num_envs, np.bool_),
        truncated=np.zeros(num_envs, np.bool_), final_obs=np.zeros((num_envs, 4), np.float32),
        has_final_obs=np.zeros(num_envs, np.bool_),
    )
