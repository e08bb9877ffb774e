"""Stopping and resuming runs: what lets a user interrupt a run and pick it up again.

- ``StopRequest``: SIGINT (Ctrl-C) or SIGTERM (a cluster's pre-emption) asks the training loop to
  stop after the current update; the loop then saves a checkpoint and returns. A second SIGINT
  aborts at once (``KeyboardInterrupt``); later ones are ignored while the run records that.
  Once the run's final save has begun (``finishing``), signals are only noted: it completes.
- ``write_status`` / ``read_status``: ``run_status.json`` in the experiment folder says whether the
  run is ``running``, ``interrupted``, ``finished``, ``aborted`` (Ctrl-C twice), ``failed`` (an
  error) or ``crashed`` (its process died unrecorded), and why, written atomically.
- ``FolderLock``: one writer per run folder (``run.lock``, locked while its run lives);
  ``mark_if_crashed`` / ``mark_crashed_runs``: a ``running`` status nobody holds the lock of
  becomes ``crashed``; ``claim_if_orphaned``: that lock, for a process that records such a run's
  end itself (a rank that outlived rank 0).
- ``find_resumable(config)``: ``--resume`` without a path: the newest run of the same config
  under ``<basedir>/<name>/`` that is not finished (the most recently active).
- ``resolve_resume(config, resume)``: what ``--resume`` names: a checkpoint (read once, for the
  trainer to restore) and its folder.
- ``resume_command(folder)``: the exact command that resumes a run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs.config import ConfigError, RunConfig, load_yaml
from gpu_envs.runs.experiment import experiment_root

STATUS_FILE = "run_status.json"
CONFIG_FILE = "total_config.yaml"
LOCK_FILE = "run.lock"
#: Exit codes of a run stopped by a signal (the shell's 128 + signal number).
EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}


class StopRequest:
    """While entered, SIGINT and SIGTERM set ``signal_name`` instead of killing the process.

    Only the main thread can take signals; elsewhere (a Lightning worker thread, say) the
    handlers are left as they are and ``signal_name`` stays None. Once the loop sets
    ``finishing`` (its final save, status and plot are under way), a signal is only noted: a
    second SIGTERM or Ctrl-C then no longer kills or aborts what is nearly done.
    """

    def __init__(self, announce=print):
        self.signal_name: str | None = None
        self.aborting = False
        self.finishing = False
        self._announce = announce
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def _handle(self, number: int, frame) -> None:
        name = signal.Signals(number).name
        if self.aborting:
            return  # the run is recording its abort in its status: let it
        if self.finishing:
            self._say(f"[{name}] noted: the run is writing its final checkpoint, status and plot")
            return
        if self.signal_name is not None and number == signal.SIGINT:
            self.aborting = True
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, without saving
        self.signal_name = name
        self._say(
            f"[{name}] finishing the current iteration, then saving a checkpoint "
            "(Ctrl-C again to abort without saving)"
        )

    def _say(self, text: str) -> None:
        """``announce(text)``, unless the signal came while the console was being written: a
        buffered stream refuses a write inside its own (a ``RuntimeError``)."""
        with contextlib.suppress(RuntimeError):
            self._announce(text)


def write_status(folder: Path, status: str, **details: Any) -> None:
    """Write ``run_status.json`` (``status`` and ``details``) atomically."""
    record = {"status": status, "updated": datetime.now().isoformat(timespec="seconds"), **details}
    handle, tmp = tempfile.mkstemp(prefix=f".{STATUS_FILE}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(handle, ckpt.FILE_MODE)
        with os.fdopen(handle, "w", encoding="utf8") as file:
            json.dump(record, file, indent=2)
            file.write("\n")
        os.replace(tmp, folder / STATUS_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_status(folder: Path) -> dict:
    """The run's ``run_status.json``; ``{"status": "unknown"}`` when missing or unreadable."""
    try:
        record = json.loads((folder / STATUS_FILE).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return {"status": "unknown"}
    return record if isinstance(record, dict) and "status" in record else {"status": "unknown"}


def _lock(path: Path) -> int | None:
    """A descriptor of ``path`` (created if missing) holding its exclusive ``flock``; None while
    another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class FolderLock:
    """One writer per run folder: ``<folder>/run.lock`` locked (``fcntl.flock``) and holding this
    process's PID until ``release``. The OS unlocks it when the process ends, however it ends, so a
    killed run never leaves its folder locked.

    Raises ``checkpoint.RunFolderError`` naming the folder and the holder's PID when another
    process holds it.
    """

    def __init__(self, folder: Path):
        fd = _lock(folder / LOCK_FILE)
        if fd is None:
            holder = (folder / LOCK_FILE).read_text(encoding="utf8").strip() or "?"
            raise ckpt.RunFolderError(
                f"{folder} is in use: process {holder} is writing it (it holds {LOCK_FILE}); one "
                "run writes a folder at a time: wait for that run to end, or stop it"
            )
        self._hold(fd)

    @classmethod
    def if_free(cls, folder: Path, wait_s: float = 0.0) -> FolderLock | None:
        """The folder's lock once no process holds it, trying for up to ``wait_s`` seconds; None
        when another process still holds it then."""
        deadline = time.monotonic() + wait_s
        while (fd := _lock(folder / LOCK_FILE)) is None:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        lock = cls.__new__(cls)
        lock._hold(fd)
        return lock

    def _hold(self, fd: int) -> None:
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except BaseException:  # (a full disk): not left locked
            os.close(fd)
            raise
        self._fd: int | None = fd

    def release(self) -> None:
        """Unlock the folder (at the run's end); once released, nothing."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def claim_if_orphaned(folder: Path, wait_s: float = 0.0) -> FolderLock | None:
    """The lock of ``folder`` when its run is orphaned: its status says ``running`` while no
    process holds the lock (the process that wrote the folder ended without recording why), for
    the caller to record the run's end, then release it. None when the folder is not on this
    machine's filesystem, its status says how the run ended, a process still holds the lock
    after ``wait_s`` seconds (the run is alive), or this process cannot open the lock for writing
    (a read-only folder, another user's): that run's status is left as it is."""
    if read_status(folder)["status"] != "running":
        return None
    try:
        lock = FolderLock.if_free(folder, wait_s)
    except OSError:  # a folder this process may not write (read-only, another user's)
        return None
    if lock is not None and read_status(folder)["status"] != "running":  # it ended meanwhile
        lock.release()
        return None
    return lock


def mark_if_crashed(folder: Path) -> dict:
    """``folder``'s status; one that says ``running`` while no process holds the folder's lock is
    a run that died unrecorded (SIGKILL, out of memory, a power cut): it is rewritten ``crashed``
    first, under the lock."""
    lock = claim_if_orphaned(folder)
    if lock is not None:
        try:  # (a folder whose lock this process may write, but not the folder: left as it is)
            with contextlib.suppress(OSError):
                write_status(
                    folder,
                    "crashed",
                    reason="its process ended without recording why (killed, out of memory, ...)",
                    running_since=read_status(folder).get("updated"),
                )
        finally:
            lock.release()
    return read_status(folder)


def mark_crashed_runs(parent: Path) -> None:
    """``mark_if_crashed`` for every run folder in ``parent`` (``<basedir>/<name>``)."""
    for status in parent.glob(f"*/{STATUS_FILE}"):
        mark_if_crashed(status.parent)


def same_config(a: dict, b: dict) -> bool:
    """Whether two run configs (plain data) describe the same run: equal but for the folder tag."""

    def without_tag(data: dict) -> dict:
        return {**data, "saving": {**data.get("saving", {}), "tag": None}}

    return without_tag(a) == without_tag(b)


def _saved_config(folder: Path) -> dict | None:
    try:
        return RunConfig.from_dict(load_yaml(folder / CONFIG_FILE)).to_dict()
    except ConfigError:
        return None


def _updated(folder: Path) -> float:
    """When the run in ``folder`` last changed its status (its start, for older runs)."""
    for name in (STATUS_FILE, CONFIG_FILE):
        if (folder / name).is_file():
            return (folder / name).stat().st_mtime
    return 0.0


def find_resumable(config: RunConfig, mark_crashed: bool = True) -> Path:
    """The most recently active run folder of ``config`` (same config but for ``saving.tag``) under
    ``<basedir>/<name>/`` that is not finished and holds a readable checkpoint; with
    ``mark_crashed``, the statuses of those it looks at go through ``mark_if_crashed``.

    Raises ``CheckpointError`` saying what is there instead: a finished run, runs of other
    configs, or nothing.
    """
    return _find_resumable(config, mark_crashed)[0]


def _find_resumable(config: RunConfig, mark_crashed: bool) -> tuple[Path, ckpt.LoadedCheckpoint]:
    """``find_resumable``'s folder and its newest readable checkpoint, as read there."""
    status_of = mark_if_crashed if mark_crashed else read_status
    parent = Path(config.saving.basedir) / config.saving.name
    runs = sorted((p.parent for p in parent.glob(f"*/{CONFIG_FILE}")), key=_updated, reverse=True)
    wanted, finished, other = config.to_dict(), [], 0
    for folder in runs:
        saved = _saved_config(folder)
        if saved is None or not same_config(saved, wanted):
            other += 1
            continue
        if status_of(folder)["status"] == "finished":
            finished.append(folder)
            continue
        loaded = ckpt.latest_readable_checkpoint(folder / "ckpt")
        if loaded is not None:
            return folder, loaded
    if finished:
        status = read_status(finished[0])
        raise ckpt.CheckpointError(
            f"--resume: the most recent run of this config, {finished[0]}, is finished "
            f"({status.get('reason', 'done')} at iteration {status.get('iteration', '?')}); "
            "there is nothing to resume. Start a new run without --resume, or continue that one "
            f"with a longer run: --resume {finished[0]} --total-timesteps N"
        )
    raise ckpt.CheckpointError(
        f"--resume: no unfinished run of this config with a checkpoint under {parent}"
        + (f" ({other} run(s) of other configs there)" if other else "")
    )


def resume_command(folder: Path) -> str:
    """The command that resumes the run in ``folder`` (its config is read from the folder)."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    prefix = "gpu-envs train" if program == "gpu-envs" else "python -m gpu_envs.commands.train"
    return f"{prefix} --resume {shlex.quote(str(folder))}"


def _read_named(named: Path, mark_crashed: bool) -> ckpt.LoadedCheckpoint:
    """The checkpoint ``--resume named`` reads: the file, or the newest readable one of the folder
    (or of its ``ckpt/``); see ``resolve_resume``."""
    if not named.is_dir():
        try:
            return ckpt.LoadedCheckpoint(named, ckpt.load_checkpoint(named))
        except ckpt.CheckpointError as error:
            raise ckpt.CheckpointError(f"{error}{_readable_instead(named)}") from None
    folder = named / "ckpt" if (named / "ckpt").is_dir() else named
    loaded = ckpt.latest_readable_checkpoint(folder)
    if loaded is None:
        if mark_crashed:
            mark_if_crashed(folder.parent if folder.name == "ckpt" else folder)
        raise ckpt.CheckpointError(
            f"--resume {named}: no readable iteration_<N>.pth.tar checkpoint there"
        )
    return loaded


def _readable_instead(damaged: Path) -> str:
    """The advice after a named checkpoint that does not read: the newest readable
    ``iteration_<N>.pth.tar`` beside it, to give ``--resume`` instead (or nothing)."""
    if not damaged.parent.is_dir():
        return ""
    with warnings.catch_warnings():  # (the damaged file itself is named in the error)
        warnings.simplefilter("ignore")
        other = ckpt.latest_readable_checkpoint(damaged.parent)
    if other is None or other.path == damaged:
        return ""
    return f". A readable checkpoint of that run is {other.path}: resume with --resume {other.path}"


def resolve_resume(
    config: RunConfig, resume, mark_crashed: bool = True
) -> tuple[ckpt.LoadedCheckpoint | None, Path]:
    """(checkpoint to resume from, read, or None; experiment folder to write into).

    ``resume``: None/False (new run), True (the config's own folder when ``saving.tag`` names
    one, else the newest unfinished run of this config: ``find_resumable``), or a
    path to a checkpoint file or an experiment folder. Of a
    folder's checkpoints, the newest readable one is taken; newer damaged ones are skipped with a
    warning. The checkpoint is read once, here: the trainer restores the state returned (a
    distributed run: each rank reads it). Refused (``CheckpointError``), before anything changes:
    a ``config`` that changes what a resume keeps (``checkpoint.check_resume_config``), and a
    finished run of the same config (there is nothing left to train). ``mark_crashed`` (the
    process that writes the folder: not the other ranks of a distributed run): the run folder's
    status goes through ``mark_if_crashed``.
    """
    root = experiment_root(config)
    if not resume:
        return None, root
    if resume is True and not config.saving.tag:
        loaded = _find_resumable(config, mark_crashed)[1]
    else:
        loaded = _read_named(root if resume is True else Path(resume), mark_crashed)
    path = loaded.path
    root = path.parent.parent if path.parent.name == "ckpt" else root
    try:  # through the schema: fields added since the checkpoint take their defaults
        saved = RunConfig.from_dict(loaded.state["config"])
    except ConfigError:
        saved = None  # a config this version no longer reads: the checks of the restore remain
    if saved is not None:
        ckpt.check_resume_config(saved, config, path)
    status = mark_if_crashed(root) if mark_crashed else read_status(root)
    if (
        status["status"] == "finished"
        and saved is not None
        and same_config(saved.to_dict(), config.to_dict())
    ):
        raise ckpt.CheckpointError(
            f"--resume: the run in {root} is finished ({status.get('reason', 'done')} at "
            f"iteration {status.get('iteration', '?')}); there is nothing to resume. Continue "
            "it with a longer run (--total-timesteps N) or start a new one without --resume"
        )
    return loaded, root
