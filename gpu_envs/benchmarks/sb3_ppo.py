"""SB3 PPO on CartPole-v1 (rl-zoo hyperparameters) through our SB3 adapter vs gymnasium's CartPole.

    python -m gpu_envs.benchmarks.sb3_ppo --seeds 0,1,2 --device cpu --json sb3_ppo.json

rl-baselines3-zoo hyperparams/ppo.yml, CartPole-v1: 8 envs, 1e5 timesteps, MlpPolicy, n_steps 32,
batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20, ent_coef 0, learning_rate lin_0.001,
clip_range lin_0.2. The policy trains on the CPU (SB3's advice for an MLP) with one torch thread.

Per (implementation, seed) it records the wall-clock and the CPU time of ``model.learn()`` (the
end-to-end steps/s: env steps, policy, training) and the mean of 10 deterministic evaluation
episodes at the end (``evaluate_policy``: over ``VecMonitor(SB3VecEnv)`` for ours, over
``Monitor(gym.make("CartPole-v1"))`` for gymnasium's). The two implementations alternate per seed
(:func:`gpu_envs.benchmarks.timing.alternating`), so a drift in background load hits both; before
each run it waits (bounded) for a quiet machine and records the background CPU use and the load
average beside the run (:func:`gpu_envs.benchmarks.machine.run_when_quiet`). Both env kinds are
built and stepped once before the timed runs (``first_call_s``: our kernels load from numba's
cache or compile there). Last, ``VecEnv.step`` of each alone is timed with the shared protocol.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from gpu_envs.benchmarks import machine, report, timing

if TYPE_CHECKING:
    from stable_baselines3 import PPO

IMPLEMENTATIONS = ("gymnasium", "gpu_envs")
RL_ZOO: dict[str, Any] = dict(
    n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0
)
NUM_ENVS = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``gpu-envs bench sb3-ppo``."""
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument(
        "--device", default="cpu", help="device of our env (the policy trains on the CPU)"
    )
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    machine.add_quiet_arguments(parser)
    parser.add_argument(
        "--step-calls", type=int, default=5000, help="VecEnv.step calls timed per repeat"
    )
    parser.add_argument("--json", default=None, help="write every run and the summary here")


def linear_schedule(start: float):
    """SB3's linear schedule: ``start`` scaled by the remaining progress (1 to 0)."""
    return lambda progress_remaining: progress_remaining * start


def rl_zoo_ppo(env, seed: int) -> PPO:
    """SB3 PPO with rl-zoo's CartPole-v1 hyperparameters on ``env``, trained on the CPU."""
    from stable_baselines3 import PPO

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


def _envs(impl: str, seed: int, device: str):
    """(training VecEnv, evaluation env) of one implementation."""
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import VecMonitor

    if impl == "gymnasium":
        return make_vec_env("CartPole-v1", n_envs=NUM_ENVS, seed=seed), Monitor(
            gym.make("CartPole-v1")
        )
    from gpu_envs.adapters.sb3 import make_sb3_vec_env

    return (
        VecMonitor(make_sb3_vec_env("gpu_envs/CartPole-v1", num_envs=NUM_ENVS, device=device)),
        VecMonitor(make_sb3_vec_env("gpu_envs/CartPole-v1", num_envs=1, device=device)),
    )


def run_one(impl: str, seed: int, timesteps: int, device: str, eval_episodes: int) -> dict:
    """Train one PPO model and evaluate it."""
    from stable_baselines3.common.evaluation import evaluate_policy

    env, eval_env = _envs(impl, seed, device)
    model = rl_zoo_ppo(env, seed)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=timesteps)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    eval_mean, eval_std = cast(
        tuple[float, float],  # not return_episode_rewards: the mean and std
        evaluate_policy(model, eval_env, n_eval_episodes=eval_episodes, deterministic=True),
    )
    env.close()
    eval_env.close()
    return dict(
        impl=impl,
        seed=seed,
        timesteps=int(model.num_timesteps),
        wall_s=wall,
        cpu_s=cpu,
        steps_per_s=model.num_timesteps / wall,
        steps_per_cpu_s=model.num_timesteps / cpu,
        eval_mean=float(eval_mean),
        eval_std=float(eval_std),
    )


def warm_up(device: str) -> dict:
    """Step both kinds of env once before timing: loads our compiled kernels (numba cache) and
    both import paths, so that no timed run pays a one-off cost. Returns the seconds each took."""
    import numpy as np

    seconds = {}
    for impl in IMPLEMENTATIONS:
        start = time.perf_counter()
        env, eval_env = _envs(impl, 0, device)
        env.reset()
        env.step(np.zeros(NUM_ENVS, dtype=np.int64))
        env.close()
        eval_env.close()
        seconds[impl] = time.perf_counter() - start
    return seconds


def time_vec_steps(impl: str, device: str, calls: int, repeats: int = 3) -> float:
    """Median microseconds per ``VecEnv.step`` of 8 envs with random actions over ``repeats`` of
    ``calls`` steps (the env side alone: ours through ``VecMonitor(SB3VecEnv)``, gymnasium's
    through a ``DummyVecEnv`` of ``Monitor`` envs)."""
    import numpy as np

    env, eval_env = _envs(impl, 0, device)
    env.reset()
    next_actions = timing.cycle_pool(np.random.default_rng(0).integers(0, 2, (64, NUM_ENVS)))
    runner = timing.Runner(lambda: env.step(next_actions()), NUM_ENVS, close=env.close)
    with runner:
        result = timing.measure(runner, repeats=repeats, calls_per_repeat=calls)
    eval_env.close()
    return 1e6 * NUM_ENVS / result.env_steps_per_s


def summarize(runs: list[dict]) -> dict:
    """Per implementation: median steps/s (wall and CPU), eval means, seeds reaching >= 475."""
    import statistics

    summary: dict[str, Any] = {}
    for impl in IMPLEMENTATIONS:
        mine = [r for r in runs if r["impl"] == impl]
        if mine:
            summary[impl] = dict(
                median_steps_per_s=statistics.median(r["steps_per_s"] for r in mine),
                median_steps_per_cpu_s=statistics.median(r["steps_per_cpu_s"] for r in mine),
                eval_means=[r["eval_mean"] for r in mine],
                seeds_at_475=sum(r["eval_mean"] >= 475 for r in mine),
                seeds=len(mine),
            )
    by_seed = {(r["impl"], r["seed"]): r for r in runs}
    for key in ("steps_per_s", "steps_per_cpu_s"):
        ratios = [
            by_seed["gpu_envs", seed][key] / by_seed["gymnasium", seed][key]
            for impl, seed in by_seed
            if impl == "gpu_envs" and ("gymnasium", seed) in by_seed
        ]
        summary[f"ours_over_theirs_{key}_per_seed"] = ratios
    return summary


def markdown(runs: list[dict], summary: dict) -> str:
    """The runs and their summary as a Markdown table."""
    lines = [
        "| env | seed | learn wall s | steps/s (wall) | steps/s (CPU time) | eval mean ± std | "
        "background CPU before | load avg |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['impl']} | {r['seed']} | {r['wall_s']:.1f} | {r['steps_per_s']:.0f} | "
            f"{r['steps_per_cpu_s']:.0f} | {r['eval_mean']:.1f} ± {r['eval_std']:.1f} | "
            f"{report.format_share(r['background_busy_before'])} | "
            f"{r['loadavg_before']:.1f} → {r['loadavg_after']:.1f} |"
        )
    lines += [
        "",
        "| env | median steps/s (wall) | median steps/s (CPU time) | seeds with eval mean ≥ 475 | "
        "VecEnv.step of 8 envs alone, µs |",
        "|---|---|---|---|---|",
    ]
    for impl in IMPLEMENTATIONS:
        s = summary[impl]
        lines.append(
            f"| {impl} | {s['median_steps_per_s']:.0f} | {s['median_steps_per_cpu_s']:.0f} | "
            f"{s['seeds_at_475']}/{s['seeds']} | {s['vec_step_us']:.0f} |"
        )
    for key in ("steps_per_s", "steps_per_cpu_s"):
        ratios = ", ".join(f"{ratio:.2f}" for ratio in summary[f"ours_over_theirs_{key}_per_seed"])
        lines.append(f"\nours / theirs, {key} per seed: {ratios}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench sb3-ppo``: the runs, their table and the JSON record."""
    import torch

    torch.set_num_threads(args.threads)
    seeds = report.parse_int_list(args.seeds, minimum=0)
    first_call_s = warm_up(args.device)
    runs = []
    for seed, impl in timing.alternating(seeds, IMPLEMENTATIONS):
        result = machine.run_when_quiet(
            partial(run_one, impl, seed, args.timesteps, args.device, args.eval_episodes),
            args.max_wait,
            args.quiet_threshold,
        )
        runs.append(result)
        print(
            f"{impl:9s} seed {seed}: {result['wall_s']:.1f} s, {result['steps_per_s']:.0f} "
            f"steps/s ({result['steps_per_cpu_s']:.0f} per CPU s), eval {result['eval_mean']:.1f}",
            flush=True,
        )
    summary = summarize(runs)
    for impl in IMPLEMENTATIONS:
        summary[impl]["vec_step_us"] = time_vec_steps(impl, args.device, args.step_calls)
    print(markdown(runs, summary))
    record = dict(
        bench="sb3_ppo_cartpole",
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=machine.machine_info(),
        args=report.settings(args),
        first_call_s=first_call_s,
        runs=runs,
        summary=summary,
    )
    if args.json:
        report.write_json(record, args.json)
    return 0


def main(argv=None) -> int:
    """Command line: ``python -m gpu_envs.benchmarks.sb3_ppo``."""
    return report.command_line(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
