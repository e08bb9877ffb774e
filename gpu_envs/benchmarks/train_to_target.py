"""Time to a target return, a bundled trainer preset vs SB3 PPO: shared by every ``bench train-*``.

A ``TrainToTarget`` names the preset, the gymnasium env id, the return threshold, the target ratio
and how to build SB3's model; ``gpu_envs.benchmarks.train_cartpole`` and ``train_pendulum`` each
declare one.

Per seed, the two implementations alternate (:func:`gpu_envs.benchmarks.timing.alternating`, so a
drift in background load hits both); before each run it waits (bounded) for a quiet machine and
records the background CPU use and load average
(:func:`gpu_envs.benchmarks.machine.run_when_quiet`).

* gpu_envs: the preset in a fresh process per seed (``Trainer.fit`` through the same config path as
  ``gpu-envs train PRESET --seed S``). Its clock excludes the warm-up (kernel load/compile) and the
  greedy evaluations; the run stops at the first evaluation mean >= the threshold
  (``evaluation.stop_value``). Its time is the run's ``update_seconds``: to the end of the update
  whose evaluation reached the threshold (the metrics log and the checkpoint written after that
  evaluation excluded, as SB3's and PureJaxRL's clocks exclude theirs).
* sb3: PPO with rl-zoo's hyperparameters, 1 torch thread, CPU, in this process after one warm-up
  run. Every ``--sb3-eval-freq`` timesteps (default: the preset's evaluation cadence) and at the
  end, right after a PPO update, a callback runs a deterministic ``evaluate_policy`` on
  ``Monitor(gym.make(env_id))``, outside the clock (training seconds = ``learn()`` wall since
  training start minus evaluation time), and stops at the first mean >= the threshold.

A run that never reaches the threshold reports null ("not reached" in the table). The summary
checks the target: gpu_envs reaches the threshold on every seed, and the ratio of the median
training seconds gpu_envs / sb3 is <= the target ratio (a seed that never reaches it counts as
infinitely slow). The per-seed ratios are shown too, but a seed number pairs two unrelated learning
runs, so their median mixes the spread of both.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from gpu_envs.benchmarks import machine, report, timing
from gpu_envs.runs.presets import preset

if TYPE_CHECKING:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

IMPLEMENTATIONS = ("gpu_envs", "sb3")

# Runs the trainer like `gpu-envs train ARGS...` and writes Trainer.fit's summary to argv[1].
_CHILD = """
import argparse, json, sys
from gpu_envs.commands import train as train_cli
from gpu_envs.trainers.fabric_loop import train
parser = argparse.ArgumentParser()
train_cli.add_arguments(parser)
args, extra = parser.parse_known_args(sys.argv[2:])
result = train(train_cli.build_config(args, extra))
with open(sys.argv[1], "w") as f:
    json.dump(result, f)
"""


@dataclass
class Evaluations:
    """What a :meth:`TrainToTarget.threshold_callback` found in an SB3 run: the best evaluation
    mean, the training seconds and steps at the first mean >= the threshold (None until then) and
    the seconds spent evaluating."""

    best_eval: float | None = None
    reached: dict | None = None
    eval_s: float = 0.0


@dataclass(frozen=True)
class TrainToTarget:
    """One ``bench train-<preset>``: our ``preset`` vs SB3 on ``env_id`` to a mean return >=
    ``threshold``.

    ``sb3_model(seed)`` builds SB3's PPO (rl-zoo's hyperparameters) on its training envs.
    """

    preset: str
    env_id: str
    target_ratio: float
    sb3_model: Callable[[int], PPO]

    @property
    def bench(self) -> str:
        return f"train_{self.preset}"

    @property
    def threshold(self) -> float:
        return float(preset(self.preset)["evaluation"]["stop_value"])

    @property
    def preset_eval_steps(self) -> int:
        """Env steps between the preset's evaluations (its eval_freq x train_batch_size)."""
        config = preset(self.preset)
        return config["evaluation"]["eval_freq"] * config["trainer"]["train_batch_size"]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
        parser.add_argument(
            "--override",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"config override for `gpu-envs train {self.preset}` (repeatable)",
        )
        parser.add_argument("--timesteps", type=int, default=100_000, help="SB3 learn() budget")
        parser.add_argument(
            "--sb3-eval-freq",
            type=int,
            default=self.preset_eval_steps,
            help="SB3 timesteps between evaluations (default: the preset's eval_freq x "
            "train_batch_size)",
        )
        parser.add_argument(
            "--eval-episodes",
            type=int,
            default=preset(self.preset)["evaluation"]["num_episodes"],
            help="SB3 episodes per evaluation (default: the preset's evaluation.num_episodes)",
        )
        parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for SB3")
        machine.add_quiet_arguments(parser)
        parser.add_argument(
            "--json", default=None, help="write every run, the summary and the machine here"
        )

    def reached(self, best_eval: float | None) -> bool:
        return best_eval is not None and best_eval >= self.threshold

    def run_ours(self, seed: int, overrides: list[str]) -> dict:
        """One `gpu-envs train PRESET --seed SEED` in a fresh process; its log stays in a temp
        folder."""
        with tempfile.TemporaryDirectory(prefix=f"{self.bench}_") as tmp:
            result_path, log_path = os.path.join(tmp, "result.json"), os.path.join(tmp, "train.log")
            command = [
                sys.executable,
                "-c",
                _CHILD,
                result_path,
                self.preset,
                "--seed",
                str(seed),
                f"saving.basedir={tmp}",
                *overrides,
            ]
            start = time.perf_counter()
            with open(log_path, "w") as log:
                code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
            wall = time.perf_counter() - start
            if code != 0:
                with open(log_path) as log:
                    tail = log.read()[-3000:]
                raise RuntimeError(
                    f"gpu-envs train {self.preset} --seed {seed} exited with {code}:\n{tail}"
                )
            with open(result_path) as f:
                result = json.load(f)
        best = result["best_eval"] if result["best_eval"] > float("-inf") else None
        reached = self.reached(best)
        return dict(
            train_s=result["update_seconds"] if reached else None,
            steps=result["env_steps"] if reached else None,
            best_eval=best,
            total_train_s=result["train_seconds"],
            total_steps=result["env_steps"],
            wall_s=wall,
        )

    def threshold_callback(
        self, eval_freq: int, episodes: int, seed: int, found: Evaluations
    ) -> BaseCallback:
        """An SB3 callback: deterministic evaluations every ``eval_freq`` timesteps (after the
        update) and at the end, outside its training clock, recorded in ``found``; stops training
        at the first mean >= the threshold.

        Like the trainer's evaluator, every evaluation plays the same episodes: its env is
        reseeded with ``seed`` (the preset's ``evaluation.seed``) first, so a seed's run is the
        same in every bench run: unseeded evaluations would move SB3's median between bench runs
        (see the trainer benchmarks page)."""
        import gymnasium as gym
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.evaluation import evaluate_policy
        from stable_baselines3.common.monitor import Monitor

        bench = self

        class ThresholdCallback(BaseCallback):
            def __init__(self):
                super().__init__()
                self.eval_env = Monitor(gym.make(bench.env_id))
                self.next_eval, self.evaluated_at = eval_freq, -1
                self.start = 0.0

            def train_s(self) -> float:
                return time.perf_counter() - self.start - found.eval_s

            def evaluate(self) -> None:
                tick = time.perf_counter()
                self.eval_env.reset(seed=seed)  # evaluate_policy's resets continue its RNG
                mean, _ = cast(
                    tuple[float, float],  # not return_episode_rewards: the mean and std
                    evaluate_policy(
                        self.model, self.eval_env, n_eval_episodes=episodes, deterministic=True
                    ),
                )
                found.eval_s += time.perf_counter() - tick
                self.evaluated_at = self.num_timesteps
                found.best_eval = (
                    float(mean) if found.best_eval is None else max(found.best_eval, float(mean))
                )
                if bench.reached(float(mean)):
                    found.reached = dict(train_s=self.train_s(), steps=self.num_timesteps)

            def _on_training_start(self) -> None:
                self.start = time.perf_counter()

            def _on_rollout_start(self) -> None:  # right after the previous rollout's PPO update
                if self.num_timesteps >= self.next_eval:
                    self.next_eval += eval_freq
                    self.evaluate()

            def _on_step(self) -> bool:
                return found.reached is None

            def _on_training_end(self) -> None:
                if found.reached is None and self.evaluated_at != self.num_timesteps:
                    self.evaluate()
                self.eval_env.close()

        return ThresholdCallback()

    def run_sb3(self, seed: int, timesteps: int, eval_freq: int, episodes: int) -> dict:
        """SB3 PPO (rl-zoo) until the first evaluation mean >= the threshold or ``timesteps``."""
        model, found = self.sb3_model(seed), Evaluations()
        callback = self.threshold_callback(eval_freq, episodes, seed, found)
        start = time.perf_counter()
        model.learn(total_timesteps=timesteps, callback=callback)
        wall = time.perf_counter() - start
        env = model.get_env()
        assert env is not None  # the model was built on its training envs
        env.close()
        reached = found.reached or dict(train_s=None, steps=None)
        return dict(
            **reached,
            best_eval=found.best_eval,
            total_train_s=wall - found.eval_s,
            total_steps=int(model.num_timesteps),
            wall_s=wall,
        )

    def warm_up_sb3(self) -> float:
        """One rollout of SB3 and an evaluation (torch's first calls), before any timed run; its
        seconds."""
        start = time.perf_counter()
        model = self.sb3_model(0)
        model.learn(
            total_timesteps=model.n_steps * model.n_envs,
            callback=self.threshold_callback(eval_freq=1, episodes=1, seed=0, found=Evaluations()),
        )
        return time.perf_counter() - start

    def summarize(self, runs: list[dict]) -> dict:
        """Per seed ours / sb3 training seconds to the threshold, their medians and the target
        check."""
        by_key = {(r["impl"], r["seed"]): r for r in runs}
        seeds = list(dict.fromkeys(r["seed"] for r in runs))
        per_seed = []
        for seed in seeds:
            ours, sb3 = by_key[("gpu_envs", seed)]["train_s"], by_key[("sb3", seed)]["train_s"]
            ratio = ours / sb3 if ours is not None and sb3 is not None else None
            per_seed.append(dict(seed=seed, gpu_envs_s=ours, sb3_s=sb3, ratio=ratio))

        def median(key: str) -> float | None:
            """Median over the seeds, a seed that never reached the threshold counting as
            infinitely slow."""
            value = statistics.median(
                math.inf if row[key] is None else row[key] for row in per_seed
            )
            return None if math.isinf(value) else value

        reached = {
            impl: sum(row[f"{impl}_s"] is not None for row in per_seed) for impl in IMPLEMENTATIONS
        }
        ours, sb3 = median("gpu_envs_s"), median("sb3_s")
        ratio = ours / sb3 if ours is not None and sb3 is not None else None
        all_reached = reached["gpu_envs"] == len(per_seed)
        return dict(
            per_seed=per_seed,
            median_gpu_envs_s=ours,
            median_sb3_s=sb3,
            ratio_of_medians=ratio,
            median_per_seed_ratio=median("ratio"),
            target_ratio=self.target_ratio,
            threshold=self.threshold,
            seeds=len(per_seed),
            gpu_envs_seeds_reached=reached["gpu_envs"],
            sb3_seeds_reached=reached["sb3"],
            gpu_envs_all_reached=all_reached,
            target_met=all_reached and ratio is not None and ratio <= self.target_ratio,
        )

    def markdown(self, runs: list[dict], summary: dict) -> str:
        threshold = self.threshold
        lines = [
            f"| impl | seed | train s to eval ≥ {threshold:g} | env steps then | best eval | "
            "train s total | env steps total | wall s (process / learn) | background CPU before | "
            "load avg |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in runs:
            lines.append(
                f"| {r['impl']} | {r['seed']} | {report.fmt(r['train_s'], '.2f')} | "
                f"{report.fmt(r['steps'], 'd', '–')} | {report.fmt(r['best_eval'], '.1f', '–')} | "
                f"{r['total_train_s']:.2f} | {r['total_steps']} | "
                f"{r['wall_s']:.1f} | {report.format_share(r['background_busy_before'])} | "
                f"{r['loadavg_before']:.1f} → {r['loadavg_after']:.1f} |"
            )
        lines += ["", "| seed | gpu_envs s | sb3 s | gpu_envs / sb3 |", "|---|---|---|---|"]
        for row in summary["per_seed"]:
            lines.append(
                f"| {row['seed']} | {report.fmt(row['gpu_envs_s'], '.2f')} | "
                f"{report.fmt(row['sb3_s'], '.2f')} | {report.fmt(row['ratio'], '.3f', '–')} |"
            )
        lines.append(
            f"| median | {report.fmt(summary['median_gpu_envs_s'], '.2f')} | "
            f"{report.fmt(summary['median_sb3_s'], '.2f')} | "
            f"{report.fmt(summary['median_per_seed_ratio'], '.3f', '–')} |"
        )
        met = "met" if summary["target_met"] else "not met"
        seeds = summary["seeds"]
        lines += [
            "",
            f"gpu_envs reached {threshold:g} on {summary['gpu_envs_seeds_reached']}/{seeds} seeds, "
            f"sb3 on {summary['sb3_seeds_reached']}/{seeds}; target: all seeds and median "
            f"gpu_envs s / median sb3 s ≤ {self.target_ratio:g}: "
            f"{report.fmt(summary['ratio_of_medians'], '.3f', '–')} ({met})",
        ]
        return "\n".join(lines)

    def run_measured(self, impl: str, seed: int, args: argparse.Namespace) -> dict:
        """Wait for a quiet machine, then one run of ``impl`` with the background load beside it."""

        def run() -> dict:
            if impl == "gpu_envs":
                result = self.run_ours(seed, args.override)
            else:
                result = self.run_sb3(seed, args.timesteps, args.sb3_eval_freq, args.eval_episodes)
            return dict(impl=impl, seed=seed, **result)

        return machine.run_when_quiet(run, args.max_wait, args.quiet_threshold)

    def run(self, args: argparse.Namespace) -> int:
        """Entry point of ``gpu-envs bench train-PRESET``: the runs, their table and the JSON
        record."""
        import torch

        torch.set_num_threads(args.threads)
        record: dict[str, Any] = dict(
            bench=self.bench,
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            machine=machine.machine_info(),
            args=report.settings(args),
            sb3_first_call_s=self.warm_up_sb3(),
        )
        runs = []
        for seed, impl in timing.alternating(report.parse_int_list(args.seeds, 0), IMPLEMENTATIONS):
            r = self.run_measured(impl, seed, args)
            runs.append(r)
            print(
                f"{impl:8s} seed {seed}: train s to {self.threshold:g}: "
                f"{report.fmt(r['train_s'], '.2f')} "
                f"(best eval {report.fmt(r['best_eval'], '.1f', '–')}, "
                f"wall {r['wall_s']:.1f} s)",
                flush=True,
            )
        record.update(runs=runs, summary=self.summarize(runs))
        print(self.markdown(runs, record["summary"]))
        if args.json:
            report.write_json(record, args.json)
        return 0

    def main(self, argv: list[str] | None = None) -> int:
        """``python -m`` entry point: parse ``argv`` and :meth:`run`."""
        parser = argparse.ArgumentParser(
            description=f"Time to {self.threshold:g} on {self.env_id}: `gpu-envs train "
            f"{self.preset}` vs SB3 PPO (rl-zoo)"
        )
        self.add_arguments(parser)
        return self.run(parser.parse_args(argv))
