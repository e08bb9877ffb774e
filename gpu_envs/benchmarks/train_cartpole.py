"""Time to solve CartPole: `gpu-envs train cartpole` vs SB3 PPO (rl-zoo), training s to eval >= 475.

    python -m gpu_envs.benchmarks.train_cartpole --seeds 1,2,3 --json train_cartpole.json
    gpu-envs bench train-cartpole --seeds 1,2,3 --json train_cartpole.json

The shared machinery and its protocol: ``gpu_envs.benchmarks.train_to_target``. Here: the
``cartpole`` preset (10 greedy episodes every 2 iterations of 512 env steps) against SB3 PPO with
the rl-zoo CartPole-v1 hyperparameters (``sb3_ppo.rl_zoo_ppo``, 8 envs of
``make_vec_env("CartPole-v1")``, evaluated every 1024 timesteps by default, the preset's cadence).
Target: gpu_envs reaches 475 on every seed and the ratio of the median training seconds
gpu_envs / sb3 is <= 0.25.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from gpu_envs.benchmarks.sb3_ppo import NUM_ENVS, rl_zoo_ppo
from gpu_envs.benchmarks.train_to_target import TrainToTarget

if TYPE_CHECKING:
    from stable_baselines3 import PPO


def _sb3_model(seed: int) -> PPO:
    from stable_baselines3.common.env_util import make_vec_env

    return rl_zoo_ppo(make_vec_env("CartPole-v1", n_envs=NUM_ENVS, seed=seed), seed)


BENCH = TrainToTarget("cartpole", "CartPole-v1", target_ratio=0.25, sb3_model=_sb3_model)
add_arguments, run, main = BENCH.add_arguments, BENCH.run, BENCH.main
run_sb3, summarize, markdown = BENCH.run_sb3, BENCH.summarize, BENCH.markdown

if __name__ == "__main__":
    sys.exit(main())
