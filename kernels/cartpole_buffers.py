"""The arrays a batch of CartPole envs lives in, shared by every driver."""

from typing import Any, NamedTuple

import numpy as np


class CartPoleBuffers(NamedTuple):
    """Per-env state, kept between steps. Arrays are NumPy (CPU) or device arrays (CUDA)."""

    state: Any          # [4, n] float32/float64: x, x_dot, theta, theta_dot of each env (component-major)
    elapsed: Any        # [n] int32: steps since the episode started
    needs_reset: Any    # [n] bool: the env finished and has not been reset yet
    episode: Any        # [n] uint64: episodes started since seeding (RNG counter)
    env_seed: Any       # [n] uint64: RNG stream of each env


class CartPoleOutputs(NamedTuple):
    """What one step writes. The kernel writes every entry of the first four for every env."""

    obs: Any            # [n, 4] float32
    rewards: Any        # [n] float32
    terminated: Any     # [n] bool
    truncated: Any      # [n] bool
    final_obs: Any      # [n, 4] float32: last observation of episodes that ended (SAME_STEP only)
    has_final_obs: Any  # [n] bool (SAME_STEP only)


#: Shape (per env) and NumPy dtype of each output.
OUTPUT_LAYOUT = {"obs": ((4,), np.float32), "rewards": ((), np.float32), "terminated": ((), np.bool_),
                 "truncated": ((), np.bool_), "final_obs": ((4,), np.float32), "has_final_obs": ((), np.bool_)}


def allocate_numpy(num_envs: int, dtype) -> CartPoleBuffers:
    """Zeroed NumPy state buffers (for tests and the CUDA simulator)."""
    return CartPoleBuffers(
        state=np.zeros((4, num_envs), dtype), elapsed=np.zeros(num_envs, np.int32),
        needs_reset=np.zeros(num_envs, np.bool_), episode=np.zeros(num_envs, np.uint64),
        env_seed=np.zeros(num_envs, np.uint64),
    )


def allocate_outputs(num_envs: int) -> CartPoleOutputs:
    """Zeroed NumPy output arrays."""
    return CartPoleOutputs(*[np.zeros((num_envs, *shape), dtype) for shape, dtype in OUTPUT_LAYOUT.values()])
