"""Time per RLlib PPO iteration with 2 env runners of 1 env each: gpu-envs' CartPole against
gymnasium's, in interleaved rounds (issue 43's "many processes" shape).

    .ci/client-check rllib ppo_cartpole_speed.py [ROUNDS]

Both algorithms are built in one Ray session with the settings of ppo_cartpole.py (2,000 env
steps per iteration; Ray is told of 4 CPUs so that the 4 runners are placed at once, only 2 of them
sampling at any moment); after one warm-up iteration each, every round trains one iteration of each,
the order swapped every round. Prints each round, the medians and the median of the per-round
ratios (ours / gymnasium's, below 1.00x ours is faster), with both mean returns (close, not equal:
with 2 runners RLlib's learning is not reproducible run to run, on gymnasium's env too); exits 1
when that ratio is above ``LIMIT``.
"""

import statistics
import sys
import time

import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

OURS = "gpu_envs:gpu_envs/CartPole-v1"
THEIRS = "CartPole-v1"
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
LIMIT = 1.2


def build(env: str):
    return (
        PPOConfig()
        .environment(env)
        .env_runners(num_env_runners=2, num_envs_per_env_runner=1)
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
        .build_algo()
    )


def iteration(algo) -> tuple[float, float]:
    """One training iteration: its seconds and the env runners' mean return."""
    start = time.perf_counter()
    result = algo.train()
    return time.perf_counter() - start, result["env_runners"].get("episode_return_mean", 0.0)


ray.init(num_cpus=4)  # both algorithms' 4 runners placed at once; 2 of them step at a time
algos = {OURS: build(OURS), THEIRS: build(THEIRS)}
for algo in algos.values():
    iteration(algo)  # warm-up: first sampling, first update
times: dict[str, list[float]] = {OURS: [], THEIRS: []}
returns: dict[str, float] = {}
for round_ in range(ROUNDS):
    order = [OURS, THEIRS] if round_ % 2 == 0 else [THEIRS, OURS]
    for env in order:
        seconds, returns[env] = iteration(algos[env])
        times[env].append(seconds)
    print(
        f"round {round_ + 1}: {OURS} {times[OURS][-1]:5.2f} s, {THEIRS} {times[THEIRS][-1]:5.2f} s"
        f" (mean return {returns[OURS]:.2f} / {returns[THEIRS]:.2f})",
        flush=True,
    )
for algo in algos.values():
    algo.stop()
ratio = statistics.median(o / t for o, t in zip(times[OURS], times[THEIRS], strict=True))
print(
    f"median s / iteration: {OURS} {statistics.median(times[OURS]):.2f}, "
    f"{THEIRS} {statistics.median(times[THEIRS]):.2f}; ratio {ratio:.2f}x (limit {LIMIT}x)"
)
sys.exit(0 if ratio <= LIMIT else 1)
