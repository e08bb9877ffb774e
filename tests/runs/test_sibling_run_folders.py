"""A new run needs no write access to the run folders beside it: one it cannot lock (read-only,
another user's) whose status says ``running`` is left as it is, and the new run starts."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from gpu_envs.runs import run_control
from tests.helpers.cli_process import READ_ONLY, run_gpu_envs

TINY = [
    "train",
    "cartpole",
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=64",
    "trainer.compile=false",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
]


def _running_sibling(basedir: Path) -> Path:
    """A run folder under ``<basedir>/cartpole_ppo`` whose status says ``running``, its lock free
    (its process died unrecorded, or runs on another machine)."""
    sibling = basedir / "cartpole_ppo" / "someone_elses"
    sibling.mkdir(parents=True)
    run_control.write_status(sibling, "running")
    (sibling / run_control.LOCK_FILE).write_text("12345\n")
    return sibling


def test_a_sibling_that_cannot_be_locked_is_skipped(tmp_path, monkeypatch):
    sibling = _running_sibling(tmp_path)
    mine = tmp_path / "cartpole_ppo" / "mine"
    mine.mkdir()
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if Path(path).parent == sibling and flags & (os.O_RDWR | os.O_WRONLY | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    run_control.mark_crashed_runs(sibling.parent)  # before: OSError [Errno 30] ... run.lock
    assert run_control.read_status(sibling)["status"] == "running"
    assert run_control.claim_if_orphaned(sibling) is None


@pytest.mark.slow
def test_a_new_run_starts_beside_a_read_only_running_sibling(tmp_path):
    sibling = _running_sibling(tmp_path)
    done = run_gpu_envs(*TINY, f"saving.basedir={tmp_path}", prelude=READ_ONLY, fake_root=sibling)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "experiment folder: " in done.stdout
    assert run_control.read_status(sibling)["status"] == "running"  # not this run's to record
    (new,) = [p for p in sibling.parent.iterdir() if p != sibling]
    assert run_control.read_status(new)["status"] == "finished"


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes a folder whatever its mode")
def test_a_new_run_starts_beside_a_sibling_without_write_permission(tmp_path):
    sibling = _running_sibling(tmp_path)
    (sibling / run_control.LOCK_FILE).chmod(0o444)
    sibling.chmod(0o555)
    try:
        done = run_gpu_envs(*TINY, f"saving.basedir={tmp_path}")
    finally:
        sibling.chmod(0o755)
    assert done.returncode == 0, done.stdout + done.stderr
    assert run_control.read_status(sibling)["status"] == "running"
