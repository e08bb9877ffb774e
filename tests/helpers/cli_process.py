"""``gpu-envs`` in a fresh process, as a user runs it, optionally after a prelude that fakes what
a test cannot cause for real on any machine (a full disk; a read-only folder, which ``chmod`` does
not make for root) under the folder named by ``FAKE_ROOT``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: The environment variable naming the folder the fakes act under.
FAKE_ROOT = "GPU_ENVS_TEST_FAKE_ROOT"

_UNDER = f"""
import errno, io, os, builtins
_ROOT = os.path.realpath(os.environ["{FAKE_ROOT}"])
def _under(path):
    try:
        path = os.fsdecode(path)
    except TypeError:
        return False
    return os.path.realpath(path) == _ROOT or os.path.realpath(path).startswith(_ROOT + os.sep)
"""

#: Every write under the folder fails as on a read-only file system (EROFS): creating files or
#: folders, opening for writing.
READ_ONLY = (
    _UNDER
    + """
def _refuse(path):
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
_os_open, _mkdir, _io_open = os.open, os.mkdir, io.open
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
def _open(path, flags, *args, **kwargs):
    if flags & _WRITES and _under(path):
        _refuse(path)
    return _os_open(path, flags, *args, **kwargs)
def _mkdir_ro(path, *args, **kwargs):
    if _under(path):
        _refuse(path)
    return _mkdir(path, *args, **kwargs)
def _io_open_ro(file, mode="r", *args, **kwargs):
    if any(c in mode for c in "wax+") and _under(file):
        _refuse(file)
    return _io_open(file, mode, *args, **kwargs)
os.open, os.mkdir, io.open, builtins.open = _open, _mkdir_ro, _io_open_ro, _io_open_ro
"""
)

#: Every ``os.write`` to a file under the folder fails as on a full disk (ENOSPC): the first
#: write of a new run (its lock file's PID) meets it, as on a real full disk.
DISK_FULL = (
    _UNDER
    + """
_write = os.write
def _full(fd, data):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        target = ""
    if _under(target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _write(fd, data)
os.write = _full
"""
)


def _command(words: tuple[str, ...], prelude: str) -> list[str]:
    script = f"import sys\nsys.argv[0] = 'gpu-envs'\n{prelude}\nfrom gpu_envs import cli\n"
    return [sys.executable, "-c", script + "sys.exit(cli.main())", *words]


def _environ(fake_root: Path | None, extra: dict[str, str] | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("GPU_ENVS_DEBUG", None)  # (a test's own setting only)
    env.update(extra or {})
    if fake_root is not None:
        env[FAKE_ROOT] = str(fake_root)
    return env


def run_gpu_envs(
    *words: str,
    prelude: str = "",
    fake_root: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    """``gpu-envs WORDS`` run to its end (``prelude`` first); stdout and stderr apart."""
    return subprocess.run(
        _command(words, prelude),
        capture_output=True,
        text=True,
        env=_environ(fake_root, env),
        cwd=cwd,
        timeout=600,
    )


def start_gpu_envs(*words: str, prelude: str = "", cwd: Path | None = None) -> subprocess.Popen:
    """``gpu-envs WORDS`` started (``prelude`` first); stdout and stderr merged, unbuffered."""
    return subprocess.Popen(
        _command(words, prelude),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_environ(None, None),
        cwd=cwd,
    )
