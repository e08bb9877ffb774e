"""The arrays a batch of Tag envs lives in, shared by every driver.

The CPU and CUDA drivers take these fields as their first arguments, in this order.
"""

from typing import Any, NamedTuple

import numpy as np


class TagBuffers(NamedTuple):
    """Per-env and per-agent state, step outputs and scratch. NumPy (CPU) or device arrays (CUDA)."""

    x: Any              # [E, N] float32: position in [0, L]
    y: Any              # [E, N] float32
    heading: Any        # [E, N] float32: in [0, float32(2pi)]
    speed: Any          # [E, N] float32
    acceleration: Any   # [E, N] float32: persists between steps
    active: Any         # [E, N] bool: in the game
    t: Any              # [E] int32: steps since the episode started
    needs_reset: Any    # [E] bool: the episode ended and the env was not reset yet
    episode: Any        # [E] uint64: episodes started since seeding (RNG counter)
    env_seed: Any       # [E] uint64: RNG stream of each env
    obs: Any            # [E, N, obs_dim] float32
    rewards: Any        # [E, N] float32
    terminated: Any     # [E] bool
    truncated: Any      # [E] bool: always False (Tag ends by rule)
    final_obs: Any      # [E, N, obs_dim] float32: last observation of an ended episode (SAME_STEP)
    final_active: Any   # [E, N] bool: in-game flags at the end of that episode (SAME_STEP)
    has_final_obs: Any  # [E] bool
    tag_count: Any      # [E, N] int32: this step's tags (tagger: runners tagged, runner: 1 if tagged)
    action_error: Any   # [E] bool: sticky; an out-of-range action index reached the kernel
    knn_idx: Any        # [E, S, K] int32 scratch of the partial observation (S = 1 CPU, N CUDA)
    knn_d2: Any         # [E, S, K] float32 scratch
    knn_row: Any        # [E, N] float32 scratch when S = 1 (CPU: one agent's distances), else [E, 1]


def buffer_shapes(num_envs: int, num_agents: int, obs_dim: int, num_observed: int,
                  scratch_rows: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of every field (``num_observed``: k of the partial observation)."""
    e, n = num_envs, num_agents
    scratch = (e, scratch_rows, max(num_observed, 1))
    # One kNN worker per env (the CPU driver) ranks from a row of N distances; one worker per
    # agent (CUDA) streams them and gets a placeholder column.
    row = (e, n if scratch_rows == 1 else 1)
    f32, b, i32 = np.dtype(np.float32), np.dtype(np.bool_), np.dtype(np.int32)
    return {
        "x": ((e, n), f32), "y": ((e, n), f32), "heading": ((e, n), f32), "speed": ((e, n), f32),
        "acceleration": ((e, n), f32), "active": ((e, n), b), "t": ((e,), i32),
        "needs_reset": ((e,), b), "episode": ((e,), np.dtype(np.uint64)),
        "env_seed": ((e,), np.dtype(np.uint64)), "obs": ((e, n, obs_dim), f32),
        "rewards": ((e, n), f32), "terminated": ((e,), b), "truncated": ((e,), b),
        "final_obs": ((e, n, obs_dim), f32), "final_active": ((e, n), b), "has_final_obs": ((e,), b),
        "tag_count": ((e, n), i32), "action_error": ((e,), b),
        "knn_idx": (scratch, i32), "knn_d2": (scratch, f32), "knn_row": (row, f32),
    }


def allocate_numpy(num_envs: int, num_agents: int, obs_dim: int, num_observed: int,
                   scratch_rows: int = 1) -> TagBuffers:
    """Zeroed NumPy buffers (for tests and the CUDA simulator)."""
    shapes = buffer_shapes(num_envs, num_agents, obs_dim, num_observed, scratch_rows)
    return TagBuffers(**{name: np.zeros(shape, dtype) for name, (shape, dtype) in shapes.items()})
