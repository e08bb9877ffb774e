"""Time to solve CartPole: `gpu-envs train cartpole` vs SB3 PPO (rl-zoo), training seconds to eval >= 475.

    python -m gpu_envs.benchmarks.train_cartpole --seeds 1,2,3 --json train_cartpole.json
    gpu-envs bench train-cartpole --seeds 1,2,3 --json train_cartpole.json

The shared machinery and its protocol: ``gpu_envs.benchmarks.train_to_target``. Here: the
``cartpole`` preset (10 greedy episodes every 2 iterations of 512 env steps) against SB3 PPO with
the rl-zoo CartPole-v1 hyperparameters (``sb3_ppo.RL_ZOO``, 8 envs of ``make_vec_env("CartPole-v1")``,
evaluated every 1024 timesteps by default, the preset's cadence). Target: gpu_envs reaches 475 on
every seed and the ratio of the median training seconds gpu_envs / sb3 is <= 0.25.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from gpu_envs.benchmarks.sb3_ppo import NUM_ENVS, RL_ZOO, linear_schedule
from gpu_envs.benchmarks.train_to_target import TrainToTarget

if TYPE_CHECKING:
    from stable_baselines3 import PPO


def _sb3_model(seed: int) -> PPO:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("CartPole-v1", n_envs=NUM_ENVS, seed=seed)
    return PPO(
        "MlpPolicy",
        env,
        learning_rate=linear_schedule(1e-3),
        clip_range=linear_schedule(0.2),
        seed=seed,
        device="cpu",
        verbose=0,
        **RL_ZOO,
    )


BENCH = TrainToTarget(
    preset="cartpole",
    env_id="CartPole-v1",
    target_ratio=0.25,
    sb3_model=_sb3_model,
    sb3_warm_up_steps=RL_ZOO["n_steps"] * NUM_ENVS,
)
THRESHOLD, TARGET_RATIO = BENCH.threshold, BENCH.target_ratio
add_arguments, run, run_ours, run_sb3 = (
    BENCH.add_arguments,
    BENCH.run,
    BENCH.run_ours,
    BENCH.run_sb3,
)
summarize, markdown = BENCH.summarize, BENCH.markdown


def main(argv: list[str] | None = None) -> int:
    return BENCH.main(argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
