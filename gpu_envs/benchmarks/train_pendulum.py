"""Time to swing up Pendulum: `gpu-envs train pendulum` vs SB3 PPO (rl-zoo), to eval >= -250.

    python -m gpu_envs.benchmarks.train_pendulum --seeds 1,2,3 --json train_pendulum.json
    gpu-envs bench train-pendulum --seeds 1,2,3 --json train_pendulum.json

The shared machinery and its protocol: ``gpu_envs.benchmarks.train_to_target``. Here: the
``pendulum`` preset (Gaussian head; 100 greedy episodes every iteration of 2048 env steps)
against SB3 PPO with rl-zoo's tuned Pendulum-v1 hyperparameters (``RL_ZOO_PENDULUM``: 4 envs of
``make_vec_env("Pendulum-v1")``, 1024 steps per env per rollout, gSDE resampled every 4 steps,
learning rate 1e-3, 1e5 timesteps), evaluated every ``--sb3-eval-freq`` timesteps (default: the
preset's cadence; docs/training-pendulum.md uses 4096, one SB3 rollout). Target: gpu_envs
reaches -250 on every seed and the ratio of the median training seconds gpu_envs / sb3 is <= 0.25.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from gpu_envs.benchmarks.train_to_target import TrainToTarget

if TYPE_CHECKING:
    from stable_baselines3 import PPO

# rl-baselines3-zoo hyperparams/ppo.yml, Pendulum-v1 (tuned; its n_timesteps 1e5 is the bench's
# default budget).
RL_ZOO_PENDULUM: dict[str, Any] = dict(
    n_steps=1024,
    gae_lambda=0.95,
    gamma=0.9,
    n_epochs=10,
    ent_coef=0.0,
    learning_rate=1e-3,
    clip_range=0.2,
    use_sde=True,
    sde_sample_freq=4,
)
NUM_ENVS = 4


def _sb3_model(seed: int) -> PPO:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("Pendulum-v1", n_envs=NUM_ENVS, seed=seed)
    return PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **RL_ZOO_PENDULUM)


BENCH = TrainToTarget("pendulum", "Pendulum-v1", target_ratio=0.25, sb3_model=_sb3_model)
add_arguments, run, main = BENCH.add_arguments, BENCH.run, BENCH.main

if __name__ == "__main__":
    sys.exit(main())
