"""Pendulum-v1 env-steps/s of gpu_envs (CPU, CUDA) beside gymnasium's SyncVectorEnv.

The CartPole benchmark's machinery (:mod:`gpu_envs.benchmarks.cartpole`) with Pendulum's env and
actions: random torques drawn uniformly from [-2, 2] (float32, shape [num_envs, 1]), pre-generated.
gymnasium 1.x has no vector implementation of Pendulum (no ``vector_entry_point``), so its
SyncVectorEnv is the reference at every size.
"""

from __future__ import annotations

import argparse

import numpy as np

from gpu_envs.benchmarks import cartpole

DEFAULT_NUM_ENVS = "1,256,4096"

PENDULUM = cartpole.Game(
    "pendulum",
    "PendulumVectorEnv",
    "Pendulum-v1",
    lambda rng, pool, n: rng.uniform(-2.0, 2.0, size=(pool, n, 1)).astype(np.float32),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``gpu-envs bench pendulum``: those of ``bench cartpole``, other defaults."""
    cartpole.add_arguments(parser)
    parser.set_defaults(num_envs=DEFAULT_NUM_ENVS, sync_max_envs=0)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench pendulum``."""
    return cartpole.run(args, PENDULUM)
