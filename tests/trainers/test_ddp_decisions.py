"""Decisions a 2-process gloo run makes once for every rank: the evaluation split over the ranks
scores what ``gpu-envs evaluate`` scores, ``stop_value`` stops both ranks at the same iteration
even when only one rank's episodes reach it, a SIGINT that reaches only rank 1 stops the run as
SIGINT (exit 130); each rank takes its share of the CPUs, or ``trainer.torch_threads``; a global
batch is divided among the ranks and seeded as on one process.

The tests run this file as a script; Fabric's launcher starts rank 1 by running it again.
"""

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_envs.runs import run_control
from gpu_envs.runs.checkpoint import load_checkpoint
from gpu_envs.runs.config import ConfigError, RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers.evaluation import episode_shares, gather_result
from gpu_envs.trainers.fabric_loop import set_threads
from gpu_envs.trainers.scores import evaluate_checkpoint

#: 8 envs over both ranks (4 each), evaluations of 5 episodes (3 on rank 0, 2 on rank 1) at every
#: iteration; rank 1 adds 1000 to its episodes' returns at the second evaluation, which only the
#: gathered score can carry past stop_value (2 x 1000 / 5 = 400 over a mean return < 500).
DECISIONS = [
    "env.max_episode_steps=200",
    "trainer.num_envs=8",
    "trainer.batch_scope=global",
    "trainer.train_batch_size=64",
    "trainer.total_timesteps=640",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
    "trainer.strategy=ddp",
    "trainer.seed=5",
    "trainer.torch_threads=0",
    "trainer.compile=false",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=1",
    "evaluation.num_episodes=5",
    "evaluation.seed=11",
    "evaluation.stop_value=405",
    "saving.model_params_save_freq=1",
    "saving.tag=run",
]


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_evaluation_is_split_scored_as_evaluate_and_stops_every_rank_at_once(tmp_path):
    done = subprocess.run(
        [sys.executable, __file__, "decisions", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    # both ranks stop after the second evaluation, which rank 1's share carried past stop_value
    for rank in ranks:
        assert (rank["iterations"], rank["status"], rank["reason"]) == (
            2,
            "finished",
            "stop_value reached",
        ), rank
        assert rank["eval_episodes"] == [3, 2][ranks.index(rank)]
        assert rank["threads"] == [max(1, _cpus() // 2), max(1, _cpus() // 2)]
        assert rank["num_envs"] == 4 and rank["steps_per_iteration"] == 64
    # the global batch: env j of the 8 is seeded seed + j, as on one process
    from gpu_envs.games.cartpole import CartPoleVectorEnv

    reference, _ = CartPoleVectorEnv(8).reset(seed=5)
    first = torch.cat([torch.tensor(rank["first_obs"]) for rank in ranks])
    torch.testing.assert_close(first, reference, rtol=0, atol=0)
    # the score of iteration 1 is `gpu-envs evaluate`'s for its checkpoint (5 episodes, seed 11)
    run = tmp_path / "cartpole_ppo" / "run"
    with open(run / "log" / "csv" / "version_0" / "metrics.csv", newline="") as handle:
        scores = [
            float(r["eval/mean_return"])
            for r in csv.DictReader(handle)
            if r.get("eval/mean_return")
        ]
    assert len(scores) == 2 and scores[1] >= 405 > scores[0]
    report = evaluate_checkpoint(run / "ckpt" / "iteration_1.pth.tar", episodes=5, seed=11)
    assert report.mean("agent") == scores[0]
    assert load_checkpoint(run / "ckpt" / "iteration_2.pth.tar")["best_eval"] == scores[1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_sigint_on_rank_1_only_is_reported_as_sigint_and_torch_threads_is_honoured(tmp_path):
    done = subprocess.run(
        [sys.executable, __file__, "sigint", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 130, done.stdout[-2000:] + done.stderr[-3000:]
    assert "gpu-envs train: stopped by SIGINT at iteration 2/" in done.stdout
    status = run_control.read_status(tmp_path / "cartpole_ppo" / "run")
    assert (status["status"], status["reason"]) == ("interrupted", "SIGINT")
    for r in (0, 1):
        assert json.loads((tmp_path / f"threads{r}.json").read_text()) == 3, r


def test_episode_shares_split_every_episode_once():
    assert episode_shares(5, 2) == [3, 2]
    assert episode_shares(4, 4) == [1, 1, 1, 1]
    with pytest.raises(ConfigError, match=r"evaluation.num_episodes: .* at least 3, got 2"):
        episode_shares(2, 3)


def test_gathered_shares_are_the_episodes_in_order():
    shares = [3, 2]
    results = [
        {"returns": {"a": torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)},
         "lengths": torch.tensor([4.0, 5.0, 6.0], dtype=torch.float64), "seconds": 0.5},
        {"returns": {"a": torch.tensor([7.0, 8.0], dtype=torch.float64)},
         "lengths": torch.tensor([9.0, 10.0], dtype=torch.float64), "seconds": 0.75},
    ]  # fmt: skip
    sent: list[list[torch.Tensor]] = [[], []]  # what each rank sends to each all_gather
    for rank, result in enumerate(results):

        def record(tensor, rank=rank):
            sent[rank].append(tensor)
            return torch.stack([tensor, tensor])

        gather_result(result, record, shares)
    gathered = iter(torch.stack(pair) for pair in zip(*sent))  # what every rank receives
    whole = gather_result(results[0], lambda tensor: next(gathered), shares)
    assert whole["returns"]["a"].tolist() == [1.0, 2.0, 3.0, 7.0, 8.0]
    assert whole["lengths"].tolist() == [4.0, 5.0, 6.0, 9.0, 10.0]
    assert (whole["envsteps"], whole["seconds"]) == (34, 0.75)


def test_global_batch_must_divide_among_the_processes():
    config = RunConfig.from_dict(
        apply_overrides(
            preset("cartpole"),
            ["trainer.num_envs=6", "trainer.train_batch_size=48", "trainer.batch_scope=global"],
        )
    )
    assert config.trainer.envs_per_rank(3) == 2 and config.trainer.envs_per_rank(1) == 6
    with pytest.raises(ConfigError, match=r"trainer.num_envs: .* multiple of .* \(4\), got 6"):
        config.trainer.envs_per_rank(4)
    four = [
        "trainer.num_envs=6",
        "trainer.train_batch_size=48",
        "trainer.batch_scope=global",
        "trainer.devices=4",
    ]
    with pytest.raises(ConfigError, match=r"trainer.num_envs: .* \(4\), got 6"):
        RunConfig.from_dict(apply_overrides(preset("cartpole"), four))


def test_threads_default_to_the_cpus_per_local_process():
    import numba

    before = torch.get_num_threads(), numba.get_num_threads()
    try:
        assert set_threads(0, 1) == _cpus()
        assert set_threads(0, 2 * _cpus()) == 1  # at least one
        assert numba.get_num_threads() == 1  # the envs' kernels take the share too
        assert set_threads(3, 2 * _cpus()) == 3  # torch_threads wins (torch's only)
        assert numba.get_num_threads() == 1
    finally:
        torch.set_num_threads(before[0])
        numba.set_num_threads(before[1])


def _decisions(out: Path) -> None:
    """On each rank: the ``DECISIONS`` run, rank 1 inflating its second evaluation."""
    from gpu_envs.trainers import evaluation
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric, set_threads

    config = RunConfig.from_dict(
        apply_overrides(preset("cartpole"), [*DECISIONS, f"saving.basedir={out}"])
    )
    fabric = make_fabric(config)
    set_threads(config.trainer.torch_threads, fabric.strategy.num_processes)
    run = evaluation.Evaluator.run

    def inflated(self):
        result = run(self)
        if fabric.global_rank == 1 and self.evaluations == 2:
            result["returns"] = {tag: v + 1000 for tag, v in result["returns"].items()}
        return result

    evaluation.Evaluator.run = inflated
    trainer = Trainer(fabric, config)
    first_obs = trainer.game.reset(5 + fabric.global_rank * trainer.num_envs)[:, 0]
    summary = trainer.fit()
    record = {
        "iterations": summary["iterations"],
        "status": summary["status"],
        "reason": summary["reason"],
        "eval_episodes": trainer.evaluator.game.num_envs,
        "threads": [torch.get_num_threads(), __import__("numba").get_num_threads()],
        "num_envs": trainer.num_envs,
        "steps_per_iteration": trainer.steps_per_iteration,
        "first_obs": first_obs.tolist(),
    }
    (out / f"rank{fabric.global_rank}.json").write_text(json.dumps(record))


def _sigint(out: Path) -> None:
    """``gpu-envs train`` on 2 processes with ``trainer.torch_threads=3``; a SIGINT raised in
    rank 1 alone while iteration 2 learns. Each rank writes its torch threads at exit."""
    import atexit

    from gpu_envs.commands import train
    from gpu_envs.trainers import ppo

    learn = ppo.learn

    def interrupted_learn(groups, rollout, iteration, num_iterations):
        if iteration == 2 and os.environ.get("LOCAL_RANK") == "1":
            signal.raise_signal(signal.SIGINT)
        return learn(groups, rollout, iteration, num_iterations)

    ppo.learn = interrupted_learn
    atexit.register(
        lambda: (out / f"threads{os.environ.get('LOCAL_RANK', '0')}.json").write_text(
            json.dumps(torch.get_num_threads())
        )
    )
    sys.exit(
        train.main(
            [
                "cartpole",
                "--devices",
                "2",
                "--strategy",
                "ddp",
                "--accelerator",
                "cpu",
                "trainer.num_envs=4",
                "trainer.train_batch_size=32",
                "trainer.total_timesteps=640",
                "trainer.torch_threads=3",
                "trainer.compile=false",
                "trainer.progress_bar=false",
                "policy.agent.model.fc_dims=[8]",
                "evaluation.eval_freq=0",
                "saving.tag=run",
                f"saving.basedir={out}",
            ]  # fmt: skip
        )
    )


if __name__ == "__main__":
    from gpu_envs.trainers.fabric_loop import leave_process_group

    {"decisions": _decisions, "sigint": _sigint}[sys.argv[1]](Path(sys.argv[2]))
    leave_process_group()
