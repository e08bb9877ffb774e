"""RLlib's PPO on CartPole (its tuned example's settings), with the env line changed to gpu-envs'.

    .ci/client-check rllib ppo_cartpole.py

The env is gymnasium's module-prefixed id ``"gpu_envs:gpu_envs/CartPole-v1"``: RLlib's env runners
are processes of their own that never run the script's ``import gpu_envs``, and the prefix makes
``gym.make`` import the package (which registers the ids) in each of them. The plain
``"gpu_envs/CartPole-v1"`` fails there with ``NamespaceNotFound`` (see docs/using-with-rllib.md).
Prints the mean return per iteration; exits 1 when it has not reached ``TARGET`` by the last one.
"""

import sys
import time

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

ENV = "gpu_envs:gpu_envs/CartPole-v1"
TARGET = 100.0
ITERATIONS = 12

config = (
    PPOConfig()
    .environment(ENV)
    .env_runners(num_env_runners=1)
    .rl_module(
        model_config=DefaultModelConfig(
            fcnet_hiddens=[32], fcnet_activation="linear", vf_share_layers=True
        )
    )
    .training(
        gamma=0.99,
        lr=0.0003,
        num_epochs=6,
        vf_loss_coeff=0.01,
        train_batch_size_per_learner=2000,
    )
    .debugging(seed=0)
)

algo = config.build_algo()
best = 0.0
for iteration in range(1, ITERATIONS + 1):
    start = time.perf_counter()
    result = algo.train()
    seconds = time.perf_counter() - start
    mean = result["env_runners"].get("episode_return_mean", float("nan"))
    best = max(best, mean)
    print(f"iteration {iteration:2d}  mean return {mean:7.2f}  {seconds:5.1f} s", flush=True)
    if best >= TARGET:
        break
algo.stop()
print(f"{ENV}: best mean return {best:.2f} (target {TARGET})")
sys.exit(0 if best >= TARGET else 1)
