"""The run folder's scalar loggers without Lightning: TensorBoard, one event per call, and CSV.

Importing anything of Lightning imports all of ``lightning.fabric`` (torch._dynamo, torchmetrics:
2-3 s of a one-process run's start), so the folder writes the files of Lightning's
``TensorBoardLogger`` and ``CSVLogger`` itself, with the same constructor arguments, paths and
methods (``log_metrics``, ``save``, ``finalize``, ``experiment``).

Lightning's TensorBoard logger calls ``SummaryWriter.add_scalar`` once per metric: one event (a
protobuf, a CRC and a queue hand-off to the writer thread) per value. A trainer that logs ~30
scalars every iteration of a few milliseconds paid ~0.9 ms of CPU per iteration for it (measured
here with 30 scalars; ``python -m gpu_envs.runs.event_logger`` repeats the measurement). This
logger writes the same ``simple_value`` summaries, with the same tags and step, in one event per
call (~0.15 ms): TensorBoard reads one event holding several values exactly as several events of
one value.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _number(tag: str, value: Any) -> float:
    number = value.item() if hasattr(value, "item") else value
    if not isinstance(number, (int, float)):
        raise ValueError(f"TensorBoard scalar {tag!r}: {number!r} is not a number")
    return float(number)


def _next_version(folder: Path) -> int:
    """One more than the largest ``version_<N>`` folder in ``folder`` (0 when none)."""
    versions = [
        int(path.name[len("version_") :])
        for path in (folder.iterdir() if folder.is_dir() else ())
        if path.is_dir() and path.name.startswith("version_") and path.name[8:].isdigit()
    ]
    return max(versions, default=-1) + 1


class OneEventTensorBoardLogger:
    """Lightning's ``TensorBoardLogger`` (``root_dir/name/version``, ``version_<N>`` when None,
    ``prefix`` joined with '-'), writing all of a ``log_metrics`` call's scalars as one event;
    ``writer_options`` go to ``SummaryWriter`` (``max_queue``, ``flush_secs``)."""

    LOGGER_JOIN_CHAR = "-"

    def __init__(
        self,
        root_dir: str | os.PathLike,
        name: str = "lightning_logs",
        version: int | str | None = None,
        default_hp_metric: bool = True,
        prefix: str = "",
        **writer_options: Any,
    ):
        del default_hp_metric  # (hyperparameters are not logged here)
        folder = Path(root_dir) / (name or "")
        if version is None:
            version = _next_version(folder)
        self.log_dir = str(folder / (version if isinstance(version, str) else f"version_{version}"))
        self._prefix, self._options = prefix, writer_options
        self._experiment: Any = None

    @property
    def experiment(self):
        """torch's ``SummaryWriter`` of ``log_dir``, created on first use."""
        if self._experiment is None:
            from torch.utils.tensorboard import SummaryWriter

            self._experiment = SummaryWriter(log_dir=self.log_dir, **self._options)
        return self._experiment

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Write ``metrics`` (numbers or 0-d tensors, by tag) at ``step`` as one event."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = []
        for tag, value in metrics.items():
            number = _number(tag, value)
            if self._prefix:
                tag = f"{self._prefix}{self.LOGGER_JOIN_CHAR}{tag}"
            values.append(Summary.Value(tag=tag, simple_value=number))
        self.experiment._get_file_writer().add_summary(Summary(value=values), step)

    def save(self) -> None:
        """Write the queued events to disk."""
        self.experiment.flush()

    def finalize(self, status: str) -> None:
        """Flush and close the writer (if one was created)."""
        if self._experiment is not None:
            self._experiment.flush()
            self._experiment.close()


class CSVLogger:
    """Lightning's ``CSVLogger``: ``root_dir/name/version_<N>/metrics.csv`` (the next N when
    ``version`` is None), one row per ``log_metrics`` call with its ``step``, the columns sorted,
    the rows kept until ``save``/``finalize`` (the file rewritten when new columns appear)."""

    def __init__(
        self, root_dir: str | os.PathLike, name: str = "lightning_logs", version: int | None = None
    ):
        folder = Path(root_dir) / (name or "")
        self.log_dir = str(
            folder / f"version_{_next_version(folder) if version is None else version}"
        )
        self.metrics_file_path = os.path.join(self.log_dir, "metrics.csv")
        self.metrics: list[dict[str, Any]] = []
        self.metrics_keys: list[str] = []
        self._experiment: CSVLogger | None = None

    @property
    def experiment(self) -> CSVLogger:
        """This logger, its folder created on first use (an old ``metrics.csv`` there removed)."""
        if self._experiment is None:
            os.makedirs(self.log_dir, exist_ok=True)
            if os.path.isfile(self.metrics_file_path):
                os.remove(self.metrics_file_path)
            self._experiment = self
        return self._experiment

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Keep one row: ``metrics`` (numbers or 0-d tensors) and ``step``."""
        kept = self.experiment.metrics
        row = {k: v.item() if hasattr(v, "item") else v for k, v in metrics.items()}
        row["step"] = len(kept) if step is None else step
        kept.append(row)

    def save(self) -> None:
        """Append the kept rows to ``metrics.csv``."""
        if not self.experiment.metrics:
            return
        new_keys = set().union(*self.metrics) - set(self.metrics_keys)
        self.metrics_keys = sorted([*self.metrics_keys, *new_keys])
        exists = os.path.isfile(self.metrics_file_path)
        if new_keys and exists:
            with open(self.metrics_file_path, newline="") as handle:
                old = list(csv.DictReader(handle))
            self._write("w", old, header=True)
        self._write("a" if exists else "w", self.metrics, header=not exists)
        self.metrics = []

    def finalize(self, status: str) -> None:
        """Save what is kept (if the file was ever used)."""
        if self._experiment is not None:
            self.save()

    def _write(self, mode: str, rows: list[dict], header: bool) -> None:
        with open(self.metrics_file_path, mode, newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=self.metrics_keys)
            if header:
                writer.writeheader()
            writer.writerows(rows)


def _measure(scalars: int = 30, calls: int = 200) -> None:
    """Print the CPU microseconds per ``log_metrics`` call of Lightning's logger and this one."""
    import tempfile
    import time

    from lightning.fabric.loggers import TensorBoardLogger

    metrics = {f"losses/metric_{i}": 0.5 * i for i in range(scalars)}
    with tempfile.TemporaryDirectory() as folder:
        for logger_class in (TensorBoardLogger, OneEventTensorBoardLogger):
            logger = logger_class(folder, name=logger_class.__name__, max_queue=4096)
            start = time.process_time()
            for step in range(calls):
                logger.log_metrics(metrics, step=step)
            logger.finalize("success")
            cpu_us = (time.process_time() - start) / calls * 1e6
            print(f"{logger_class.__name__}: {cpu_us:.0f} us of CPU per call of {scalars} scalars")


if __name__ == "__main__":
    _measure()
