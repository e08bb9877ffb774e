"""The CLI's one error policy (``cli.guarded``), in fresh processes as a user meets it: an expected
failure (a bad env value, a bad strategy, a full disk, a read-only folder) is one line
``gpu-envs <command>: error: <cause>; <what to do>`` with exit status 1 and no traceback unless
``--debug`` or ``GPU_ENVS_DEBUG=1``, and it leaves no run folder behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.cli_process import DISK_FULL, READ_ONLY, run_gpu_envs

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


def _refused(done, starts: str) -> str:
    """The one line of a refused command (its stderr's last line), checked."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(starts), done.stderr
    return line


def _run_folders(basedir: Path) -> list[Path]:
    return list(basedir.glob("*/*"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("words", "cause"),
    [
        (["env.max_episode_steps=-1"], "max_episode_steps must be an int in [0, 2147483647]"),
        (["--strategy", "bogus"], "You selected an invalid strategy name: `strategy='bogus'`"),
    ],
)
def test_a_bad_value_is_one_line_and_no_folder(words, cause, tmp_path):
    done = run_gpu_envs(*TINY, f"saving.basedir={tmp_path}", *words)
    line = _refused(done, f"gpu-envs train: error: {cause}")
    assert line.endswith(
        "; check that value (`gpu-envs train --print-config` shows the run's "
        "config, docs/config.md its fields)"
    )
    assert not _run_folders(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["--debug", "GPU_ENVS_DEBUG=1"])
def test_debug_shows_the_traceback_too(how, tmp_path):
    flag, env = ([how], None) if how == "--debug" else ([], {"GPU_ENVS_DEBUG": "1"})
    done = run_gpu_envs(*TINY, f"saving.basedir={tmp_path}", "--strategy", "bogus", *flag, env=env)
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("gpu-envs train: error: You selected")


#: The run's first status (``running``, once it is built) cannot be written: the disk is full.
STATUS_DISK_FULL = """
import errno, os
from gpu_envs.runs import run_control
def _full(folder, status, **details):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / run_control.STATUS_FILE))
run_control.write_status = _full
"""


@pytest.mark.slow
@pytest.mark.parametrize("prelude", [DISK_FULL, STATUS_DISK_FULL], ids=["lock", "status"])
def test_a_full_disk_is_one_line_and_leaves_no_run_folder(prelude, tmp_path):
    """The first write of a new run (its lock's PID), or its first status, fails as on a full
    disk: before, a raw traceback and a folder holding only run.lock (or no status)."""
    done = run_gpu_envs(*TINY, f"saving.basedir={tmp_path}", prelude=prelude, fake_root=tmp_path)
    line = _refused(done, "gpu-envs train: error: No space left on device")
    assert line.endswith("; free some space there, or write elsewhere (saving.basedir=FOLDER)")
    assert not _run_folders(tmp_path)


@pytest.mark.slow
def test_a_read_only_base_folder_is_one_line(tmp_path):
    basedir = tmp_path / "runs"
    basedir.mkdir()
    done = run_gpu_envs(*TINY, f"saving.basedir={basedir}", prelude=READ_ONLY, fake_root=basedir)
    line = _refused(done, "gpu-envs train: error: Read-only file system: ")
    assert str(basedir / "cartpole_ppo") in line and "saving.basedir=FOLDER" in line
    assert not list(basedir.iterdir())


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes a folder whatever its mode")
def test_a_folder_without_write_permission_is_one_line(tmp_path):
    basedir = tmp_path / "runs"
    basedir.mkdir()
    basedir.chmod(0o555)
    try:
        done = run_gpu_envs(*TINY, f"saving.basedir={basedir}")
    finally:
        basedir.chmod(0o755)
    line = _refused(done, "gpu-envs train: error: Permission denied: ")
    assert "make it writable for you, or write elsewhere (saving.basedir=FOLDER)" in line


def test_the_policy_names_cause_and_fix():
    import errno

    from gpu_envs.cli import error_line
    from gpu_envs.runs.errors import ConfigError

    full = OSError(errno.ENOSPC, "No space left on device", "/data/run")
    assert error_line("gpu-envs plot", full) == (
        "gpu-envs plot: error: No space left on device: /data/run; free some space there, or "
        "write elsewhere (another --out)"
    )
    assert error_line("gpu-envs train", ConfigError("trainer.seed: must be >= 0, got -1")) == (
        "gpu-envs train: error: trainer.seed: must be >= 0, got -1"
    )
    assert error_line("gpu-envs train", MemoryError()).startswith(
        "gpu-envs train: error: not enough memory (MemoryError); use fewer envs"
    )
    assert error_line("gpu-envs train", OSError(errno.EIO, "I/O error")) is None  # a bug
    assert error_line("gpu-envs train", KeyError("x")) is None


def test_a_bug_keeps_its_traceback_with_the_policy(monkeypatch):
    """A bug is not an expected failure: ``guarded`` raises it as it is."""
    from gpu_envs import cli

    def broken():
        raise KeyError("a bug")

    with pytest.raises(KeyError, match="a bug"):
        cli.guarded("gpu-envs plot", broken, [])


def test_an_animation_refused_by_a_read_only_folder_is_one_line_and_nothing_else(tmp_path):
    out = tmp_path / "movies"
    out.mkdir()
    done = run_gpu_envs(
        "render", "tag", "--steps", "3", "--size", "64", "--out", str(out / "tag.gif"),
        prelude=READ_ONLY, fake_root=out,
    )  # fmt: skip
    _refused(done, "gpu-envs render: error: Read-only file system: ")
    assert "Exception ignored" not in done.stderr  # (imageio's writer retrying from its finaliser)
    assert not list(out.iterdir())


def test_a_reader_that_leaves_ends_the_command_quietly(tmp_path):
    """``gpu-envs ... | head``: the pipe's reader gone before the output is written ends the
    command with SIGPIPE's status (141) and nothing on stderr, as a shell tool does."""
    import subprocess
    import sys

    script = (
        "import sys; from gpu_envs import cli; "
        "sys.argv = ['gpu-envs', 'train', '--print-config', 'cartpole']; sys.exit(cli.main())"
    )
    command = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    command.stdout.close()  # the reader leaves before the first line
    stderr = command.stderr.read().decode()
    assert command.wait(timeout=120) == 141, stderr
    assert stderr == "", stderr
