"""The console of a 2-process DDP run on the CPU (gloo), in fresh processes: one line per event
(rank 0 speaks for all), every rank with ``--all-ranks``, a failing rank named, and no third-party
noise (Lightning's DDP warnings, torch.compile's note on DDP's profiler range).

The tests run this file as a script; Fabric's launcher starts the second rank by running it again.
"""

import logging
import os
import subprocess
import sys

import pytest

from gpu_envs.commands.train import rank_said
from gpu_envs.runs import console

ARGS = [
    "cartpole", "--devices", "2", "--strategy", "ddp", "--accelerator", "cpu",
    "trainer.num_envs=4", "trainer.train_batch_size=32", "trainer.total_timesteps=128",
    "trainer.progress_bar=false", "policy.agent.model.fc_dims=[8]", "evaluation.eval_freq=1",
    "evaluation.num_episodes=2", "env.max_episode_steps=20", "trainer.collective_timeout=60",
]  # fmt: skip
#: What the console must not show: Lightning's and torch's lines that are noise to our users.
NOISE = ("Tip:", "deprecated", "will be ignored", "GLOBAL_RANK: 1")


def _run(tmp_path, *extra: str, fault: str = "none", env=None) -> subprocess.CompletedProcess:
    command = [sys.executable, __file__, fault, *ARGS, *extra, f"saving.basedir={tmp_path}"]
    environ = {k: v for k, v in os.environ.items() if k != console.ALL_RANKS}
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=400,
        cwd=tmp_path,
        env=environ | (env or {}),
    )


@pytest.mark.slow
def test_rank_0_speaks_for_all_and_no_third_party_noise(tmp_path):
    done = _run(tmp_path, "trainer.compile=true")
    assert done.returncode == 0, done.stderr[-3000:]
    err = done.stderr
    assert err.count("gradient step of policy 'agent'") == 1, err
    assert err.count("compiled in") == 1, err
    assert "[rank" not in err, err
    for noise in NOISE:
        assert noise not in err + done.stdout, (noise, err)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "variable"])
def test_every_rank_is_heard_when_asked(tmp_path, how):
    if how == "flag":
        done = _run(tmp_path, "--all-ranks", "trainer.compile=false")
    else:
        done = _run(tmp_path, "trainer.compile=false", env={console.ALL_RANKS: "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "gradient step of policy" in line]
    assert sorted(line.split("]")[0] for line in lines) == ["[rank 0", "[rank 1"], done.stderr


@pytest.mark.slow
def test_a_rank_that_fails_is_named(tmp_path):
    done = _run(tmp_path, "trainer.compile=false", fault="raise:1")
    assert done.returncode == 1, done.stderr[-3000:]
    said = done.stderr.split("gpu-envs train: rank 1 of 2 failed:\n", 1)
    assert len(said) == 2, done.stderr[-3000:]
    assert said[1].startswith("Traceback") and "RuntimeError: injected fault on rank 1" in said[1]
    assert "gpu-envs train: error: rank 0 of 2 stopped during iteration 1" in done.stderr


def test_rank_said_names_the_rank_once():
    line = "gpu-envs train: error: no space left; write elsewhere"
    assert (
        rank_said(line, 1, 2)
        == "gpu-envs train: error: rank 1 of 2: no space left; write elsewhere"
    )
    assert rank_said(line, 0, 1) == line
    aborted = "gpu-envs train: aborted without saving"
    assert rank_said(aborted, 1, 2) == "gpu-envs train: rank 1 of 2: aborted without saving"
    trace = "Traceback (most recent call last):\n  ...\nRuntimeError: x"
    assert rank_said(trace, 1, 2) == f"gpu-envs train: rank 1 of 2 failed:\n{trace}"
    stopped = "gpu-envs train: error: rank 0 of 2 stopped during iteration 3: ..."
    assert rank_said(stopped, 0, 2) == stopped


def test_the_rank_filter_keeps_warnings_of_every_rank(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv(console.ALL_RANKS, raising=False)

    def kept(level: int, all_ranks: bool) -> str | None:
        record = logging.LogRecord("gpu_envs.compile", level, __file__, 1, "compiled", None, None)
        return record.msg if console.RankFilter(all_ranks).filter(record) else None

    assert kept(logging.INFO, False) is None
    assert kept(logging.WARNING, False) == "[rank 1] compiled"
    assert kept(logging.INFO, True) == "[rank 1] compiled"
    monkeypatch.setenv("RANK", "0")
    assert kept(logging.INFO, False) == "compiled"
    monkeypatch.setenv(console.ALL_RANKS, "1")
    assert console.all_ranks_asked()


def _fault(how: str) -> None:
    """``raise:R``: rank ``R`` raises in iteration 1's update; then the train command."""
    from gpu_envs.commands import train
    from gpu_envs.trainers import ppo

    if how.startswith("raise:"):
        learn, rank = ppo.learn, how.split(":")[1]

        def faulty_learn(groups, rollout, iteration, num_iterations):
            if os.environ.get("LOCAL_RANK") == rank:
                raise RuntimeError(f"injected fault on rank {rank}")
            return learn(groups, rollout, iteration, num_iterations)

        ppo.learn = faulty_learn
    sys.exit(train.main(sys.argv[2:]))


if __name__ == "__main__":
    _fault(sys.argv[1])
