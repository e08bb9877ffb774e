"""A rank that dies (kill -9), hangs (SIGSTOP) or raises in a 2-process gloo run: rank 0 stops
within ``trainer.collective_timeout`` with the trainer's own message (which rank, the last
checkpoint, the resume command), exits with an error and records the run ``failed``; the command
it prints resumes the run. When rank 0 is the one killed, rank 1 records the run ``failed`` with
its own message.

The tests run this file as a script (``gpu-envs train``'s command line, one rank stopping itself
after iteration ``FAULT_AT``'s rollout); Fabric's launcher starts rank 1 by running it again.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpu_envs.runs import run_control

FAULT_AT, TIMEOUT_S = 3, 30  # the timeout also bounds the start-up (a loaded machine)
ARGS = [
    "cartpole", "--devices", "2", "--strategy", "ddp", "--accelerator", "cpu",
    "trainer.num_envs=4", "trainer.train_batch_size=32", "trainer.total_timesteps=640",
    "trainer.compile=false", "trainer.progress_bar=false", "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=0", "saving.model_params_save_freq=2", "saving.tag=run",
    f"trainer.collective_timeout={TIMEOUT_S}",
]  # fmt: skip


def _run(tmp_path: Path, fault: str) -> tuple[subprocess.CompletedProcess, float]:
    """Rank 0's exit code and output, and how long it ran. Through files, not pipes: a stopped
    rank 1 would hold a pipe open after rank 0 ended."""
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    command = [sys.executable, __file__, fault, *ARGS, f"saving.basedir={tmp_path}"]
    start = time.monotonic()
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run(command, stdout=stdout, stderr=stderr, timeout=240, cwd=tmp_path)
    seconds = time.monotonic() - start
    return subprocess.CompletedProcess(
        command, code.returncode, out.read_text(), err.read_text()
    ), seconds


def _rank1_pid(stderr: str) -> int:
    found = re.search(r"rank 1 \(process (\d+)\)", stderr)
    assert found, stderr[-3000:]
    return int(found.group(1))


def _check_report(done: subprocess.CompletedProcess, tmp_path: Path, what: str) -> None:
    run = tmp_path / "cartpole_ppo" / "run"
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    message = done.stderr.strip().splitlines()[-1]
    head = f"gpu-envs train: error: rank 0 of 2 stopped during iteration {FAULT_AT}: "
    assert message.startswith(head), message
    assert what in message, message
    assert (
        f"the last checkpoint is {run / 'ckpt' / 'iteration_2.pth.tar'}; resume with: "
        f"python -m gpu_envs.commands.train --resume {run}" in message
    ), message
    status = run_control.read_status(run)
    assert status["status"] == "failed", status
    assert what in status["reason"], status


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_rank_fails_the_run_naming_it_and_the_resume_command(tmp_path):
    done, _ = _run(tmp_path, "kill:1")
    pid = _rank1_pid(done.stderr)
    _check_report(done, tmp_path, f"rank 1 (process {pid}) ended by SIGKILL")
    # the printed command resumes the run from that checkpoint (on 2 processes again)
    run = tmp_path / "cartpole_ppo" / "run"
    resumed = subprocess.run(
        [sys.executable, "-m", "gpu_envs.commands.train", "--resume", str(run)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resuming from {run / 'ckpt' / 'iteration_2.pth.tar'} at iteration 2" in resumed.stdout
    assert run_control.read_status(run)["status"] == "finished"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_rank_that_raises_exits_with_its_traceback_and_code_1(tmp_path):
    """An error on rank 1: its traceback, then exit status 1 at once (not an abort at the
    interpreter's exit, where its process group's threads still wait on rank 0); rank 0 names
    it."""
    done, _ = _run(tmp_path, "raise:1")
    pid = _rank1_pid(done.stderr)
    _check_report(done, tmp_path, f"rank 1 (process {pid}) ended with exit code 1")
    assert "RuntimeError: injected fault on rank 1" in done.stderr, done.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_hung_rank_fails_the_run_within_the_collective_timeout(tmp_path):
    done, seconds = _run(tmp_path, "stop:1")
    pid = _rank1_pid(done.stderr)
    try:
        _check_report(done, tmp_path, f"rank 1 (process {pid}) is stopped")
        # the stopped rank's peers wait one collective_timeout, not torch's 30 minutes
        assert seconds < 150, seconds
    finally:
        os.kill(pid, signal.SIGKILL)  # the stopped rank stays stopped: end it


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_rank_0_is_recorded_failed_by_the_rank_that_outlives_it(tmp_path):
    """Rank 0 killed: rank 1 (its child, left running) stops with its own message and records the
    run ``failed`` with it in ``run_status.json``: the status never says ``running`` once the job
    has ended."""
    done, _ = _run(tmp_path, "kill:0")
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    mine = f"saving.basedir={tmp_path}"  # (rank 1's command line is rank 0's)
    rank1 = [p for p in psutil.process_iter(["cmdline"]) if mine in (p.info["cmdline"] or ())]
    _, alive = psutil.wait_procs(rank1, timeout=120)
    for process in alive:
        process.kill()
    assert not alive, "rank 1 outlived rank 0 by 120 s"
    run = tmp_path / "cartpole_ppo" / "run"
    message = (tmp_path / "stderr.txt").read_text().strip().splitlines()[-1]
    head = f"gpu-envs train: error: rank 1 of 2 stopped during iteration {FAULT_AT}: rank 0 ended "
    assert message.startswith(head), message
    assert f"the last checkpoint is {run / 'ckpt' / 'iteration_2.pth.tar'}; resume" in message
    status = run_control.read_status(run)
    assert status["status"] == "failed", status
    assert status["reason"] == f"RankFailure: {message.removeprefix('gpu-envs train: error: ')}"
    assert status["iteration"] == FAULT_AT
    assert run_control.mark_if_crashed(run)["status"] == "failed"  # (its lock was released)


def _fault(how: str) -> None:
    """Rank ``R`` of ``how`` (``kill:R``, ``stop:R``, ``raise:R``) kills or stops itself, or
    raises, after iteration ``FAULT_AT``'s rollout, then the command."""
    from gpu_envs.commands import train
    from gpu_envs.trainers import ppo

    learn = ppo.learn
    action, rank = how.split(":")

    def faulty_learn(groups, rollout, iteration, num_iterations):
        if iteration == FAULT_AT and os.environ.get("LOCAL_RANK") == rank:
            if action == "raise":
                raise RuntimeError(f"injected fault on rank {rank}")
            os.kill(os.getpid(), signal.SIGKILL if action == "kill" else signal.SIGSTOP)
        return learn(groups, rollout, iteration, num_iterations)

    ppo.learn = faulty_learn
    sys.exit(train.main(sys.argv[2:]))


if __name__ == "__main__":
    _fault(sys.argv[1])
