"""1 vs 2 DDP processes of ``gpu-envs train cartpole`` on the CPU (gloo): env steps per second.

Each configuration (processes x envs per process) runs about ``--steps-per-process`` env steps per
process (at least 2 iterations) of the ``cartpole`` preset (8 steps per env, 10 epochs of one
minibatch, one torch thread per process; no evaluation, not compiled); its speed is the run's env
steps (all ranks) over its training seconds (the trainer's clock, from the first rollout: start-up
and compiling excluded), read from the final checkpoint. The configurations run in interleaved
rounds (each round in another order); the table gives each one's median and the ratio of 2
processes to 1 at the same envs per process::

    python docs/ddp_scaling.py --envs 64 1024 --rounds 3 --steps-per-process 4096
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

STEPS = 8  # per env and iteration: the preset's


def run_once(processes: int, envs: int, iterations: int, basedir: Path) -> float:
    """Env steps per second of one run (a fresh ``gpu-envs train`` command)."""
    total = iterations * processes * envs * STEPS
    command = [
        sys.executable, "-m", "gpu_envs.cli", "train", "cartpole", "--accelerator", "cpu",
        "--devices", str(processes), "--strategy", "ddp" if processes > 1 else "auto",
        f"trainer.num_envs={envs}", f"trainer.train_batch_size={envs * STEPS}",
        f"trainer.total_timesteps={total}", "trainer.compile=false",
        "trainer.progress_bar=false", "evaluation.eval_freq=0", "saving.console=none",
        f"saving.basedir={basedir}", f"saving.tag=p{processes}_e{envs}",
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True)
    (checkpoint,) = basedir.glob(f"cartpole_ppo/p{processes}_e{envs}/ckpt/iteration_*.pth.tar")
    state = torch.load(checkpoint, weights_only=True)
    return state["env_step"] / state["counters"]["train_seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--steps-per-process", type=int, default=40_000, help="env steps of each process per run"
    )
    args = parser.parse_args()
    configs = [(p, e) for e in args.envs for p in (1, 2)]
    speeds: dict[tuple[int, int], list[float]] = {c: [] for c in configs}
    for round_ in range(args.rounds):
        order = configs[round_ % len(configs) :] + configs[: round_ % len(configs)]
        for processes, envs in order:
            iterations = max(2, args.steps_per_process // (envs * STEPS))
            with tempfile.TemporaryDirectory() as folder:
                sps = run_once(processes, envs, iterations, Path(folder))
            speeds[(processes, envs)].append(sps)
            print(f"round {round_ + 1}: {processes} process(es) x {envs} envs: {sps:,.0f} SPS")
    print(f"\n{os.cpu_count()} CPUs, {args.rounds} rounds, medians (env steps per second)\n")
    print("| envs per process | 1 process | 2 processes | 2 / 1 | each round's 2 / 1 |")
    print("|---|---|---|---|---|")
    for envs in args.envs:
        one, two = speeds[(1, envs)], speeds[(2, envs)]
        ratios = ", ".join(f"{b / a:.2f}" for a, b in zip(one, two))
        print(
            f"| {envs} | {statistics.median(one):,.0f} | {statistics.median(two):,.0f} | "
            f"{statistics.median(two) / statistics.median(one):.2f} | {ratios} |"
        )


if __name__ == "__main__":
    main()
