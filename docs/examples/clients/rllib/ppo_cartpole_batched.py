"""RLlib's PPO on CartPole in RLlib's batched mode: each env runner holds one gpu-envs batch.

    .ci/client-check rllib ppo_cartpole_batched.py

``gym_env_vectorize_mode="vector_entry_point"`` makes RLlib's env runner call
``gym.make_vec(ENV, num_envs, vectorization_mode="vector_entry_point", **env_config)``, which builds
our batched env (one compiled step for the runner's ``NUM_ENVS`` games) instead of gymnasium's
``SyncVectorEnv`` of ``NUM_ENVS`` single envs; ``env_config={"array": "numpy"}`` gives it the NumPy
face that RLlib's connectors read (the default face hands out torch tensors). Prints the mean
return per iteration; exits 1 when it has not reached ``TARGET`` by the last one.
"""

import sys
import time

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

ENV = "gpu_envs:gpu_envs/CartPole-v1"
NUM_ENVS = 8
TARGET = 100.0
ITERATIONS = 12

config = (
    PPOConfig()
    .environment(ENV, env_config={"array": "numpy"})
    .env_runners(
        num_env_runners=1,
        num_envs_per_env_runner=NUM_ENVS,
        gym_env_vectorize_mode="vector_entry_point",
    )
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


def runner_threads(runner) -> int:
    """The numba threads of a batch's step loop in this env runner: Ray sets OMP_NUM_THREADS to
    the runner's CPUs (1), which gpu_envs.kernels.threads follows (no pool beside torch's)."""
    from gpu_envs.kernels.threads import process_threads

    return process_threads()


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
threads = algo.env_runner_group.foreach_env_runner(runner_threads, local_env_runner=False)
algo.stop()
print(f"numba threads of each env runner's step loop: {threads}")
print(f"{ENV} x {NUM_ENVS} (batched): best mean return {best:.2f} (target {TARGET})")
sys.exit(0 if best >= TARGET and threads == [1] else 1)
