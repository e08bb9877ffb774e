"""Stopping and resuming runs: what lets a user interrupt a run and pick it up again.

- ``StopRequest``: SIGINT (Ctrl-C) or SIGTERM (a cluster's pre-emption) asks the training loop to
  stop after the current update; the loop then saves a checkpoint and returns. A second SIGINT
  aborts at once (``KeyboardInterrupt``).
- ``write_status`` / ``read_status``: ``run_status.json`` in the experiment folder says whether the
  run is ``running``, ``interrupted`` or ``finished`` (and why), written atomically.
- ``find_resumable(config)``: ``--resume`` without a path: the newest run of the same config
  under ``<basedir>/<name>/`` that is not finished (the most recently active).
- ``resolve_resume(config, resume)``: what ``--resume`` names: a checkpoint and its folder.
- ``resume_command(folder)``: the exact command that resumes a run.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import tempfile
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs.config import ConfigError, RunConfig, load_yaml
from gpu_envs.runs.experiment import experiment_root

STATUS_FILE = "run_status.json"
CONFIG_FILE = "total_config.yaml"
#: Exit codes of a run stopped by a signal (the shell's 128 + signal number).
EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}


class StopRequest:
    """While entered, SIGINT and SIGTERM set ``signal_name`` instead of killing the process.

    Only the main thread can take signals; elsewhere (a Lightning worker thread, say) the
    handlers are left as they are and ``signal_name`` stays None.
    """

    def __init__(self, announce=print):
        self.signal_name: str | None = None
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
        if self.signal_name is not None and number == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, without saving
        self.signal_name = name
        self._announce(
            f"[{name}] finishing the current iteration, then saving a checkpoint "
            "(Ctrl-C again to abort without saving)"
        )


def write_status(folder: Path, status: str, **details: Any) -> None:
    """Write ``run_status.json`` (``status`` and ``details``) atomically."""
    record = {"status": status, "updated": datetime.now().isoformat(timespec="seconds"), **details}
    handle, tmp = tempfile.mkstemp(prefix=f".{STATUS_FILE}.", suffix=".tmp", dir=folder)
    try:
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


def find_resumable(config: RunConfig) -> Path:
    """The most recently active run folder of ``config`` (same config but for ``saving.tag``) under
    ``<basedir>/<name>/`` that is not finished and holds a readable checkpoint.

    Raises ``CheckpointError`` saying what is there instead: a finished run, runs of other
    configs, or nothing.
    """
    parent = Path(config.saving.basedir) / config.saving.name
    runs = sorted((p.parent for p in parent.glob(f"*/{CONFIG_FILE}")), key=_updated, reverse=True)
    wanted, finished, other = config.to_dict(), [], 0
    for folder in runs:
        saved = _saved_config(folder)
        if saved is None or not same_config(saved, wanted):
            other += 1
            continue
        if read_status(folder)["status"] == "finished":
            finished.append(folder)
            continue
        if ckpt.latest_readable_checkpoint(folder / "ckpt") is not None:
            return folder
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


def resolve_resume(config: RunConfig, resume) -> tuple[Path | None, Path]:
    """(checkpoint to resume from or None, experiment folder to write into).

    ``resume``: None/False (new run), True (the config's own folder when ``saving.tag`` names
    one, else the newest unfinished run of this config: ``find_resumable``), or a
    path to a checkpoint file or an experiment folder. Of a
    folder's checkpoints, the newest readable one is taken; newer damaged ones are skipped with a
    warning. A finished run of the same config is refused (there is nothing left to train).
    """
    root = experiment_root(config)
    if not resume:
        return None, root
    if resume is True:
        path = root if config.saving.tag else find_resumable(config)
    else:
        path = Path(resume)
    if path.is_dir():
        folder = path / "ckpt" if (path / "ckpt").is_dir() else path
        found = ckpt.latest_readable_checkpoint(folder)
        if found is None:
            raise ckpt.CheckpointError(
                f"--resume {path}: no readable iteration_<N>.pth.tar checkpoint there"
            )
        path = found
    root = path.parent.parent if path.parent.name == "ckpt" else root
    status = read_status(root)
    try:  # through the schema: fields added since the checkpoint take their defaults
        saved = RunConfig.from_dict(ckpt.load_checkpoint(path)["config"]).to_dict()
    except ConfigError:
        saved = None
    if status["status"] == "finished" and same_config(saved or {}, config.to_dict()):
        raise ckpt.CheckpointError(
            f"--resume: the run in {root} is finished ({status.get('reason', 'done')} at "
            f"iteration {status.get('iteration', '?')}); there is nothing to resume. Continue "
            "it with a longer run (--total-timesteps N) or start a new one without --resume"
        )
    return path, root
