"""The experiment folder LightZero users know, written by rank 0 only.

Layout (``experiments/<game>_<algo>/<yymmdd_HHMMSS>/`` for the presets)::

    <basedir>/<name>/<tag>/
        run_status.json                       (running / interrupted / finished / aborted /
                                               failed / crashed, and why)
        run.lock                              (locked by the process writing the folder: its PID)
        curves.png                            (learning curves, written at the end)
        ckpt/ckpt_best.pth.tar, ckpt/iteration_<N>.pth.tar
        log/collector/collector_logger.txt
        log/evaluator/evaluator_logger.txt
        log/learner/learner_logger.txt        (model architecture first, then per-window tables)
        log/serial/events.out.tfevents.*      (TensorBoard: losses/*, charts/*, <group>_iter|step/*)
        log/csv/version_<N>/metrics.csv       (losses/*, charts/*: CleanRL's names)
        total_config.yaml                     (the resolved run config)
        results.json                          (one JSON object per log point, as the original wrote)
        videos/                               (--capture-video)

Every other rank gets a ``NullExperiment`` with the same methods doing nothing.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from datetime import datetime
from pathlib import Path

from gpu_envs.runs.checkpoint import RunFolderError, remove_temporary_files
from gpu_envs.runs.config import RunConfig, dump_yaml
from gpu_envs.runs.metrics import IterationRecord, episode_summary, learner_summary


def _stamp() -> str:
    return datetime.now().strftime("%y%m%d_%H%M%S")


def experiment_root(config: RunConfig) -> Path:
    """``<basedir>/<name>/<tag>`` of the run config's saving section; a null tag is the time now
    (``yymmdd_HHMMSS``)."""
    saving = config.saving
    return Path(saving.basedir) / saving.name / (saving.tag or _stamp())


def fresh_root(root: Path) -> Path:
    """Create and return a folder no other run holds: ``root``, else ``<root>_<yymmdd_HHMMSS>``
    (a time-stamped ``root``: ``<root>_1``), else that name + ``_1``, ``_2``, ... (DI-engine's
    renaming).

    Each candidate is claimed with an exclusive ``mkdir``, so runs started at the same moment, in
    threads or processes, never share a folder. An existing folder, even an empty one, is taken.

    ``root`` is ``<basedir>/<name>/<tag>``: ``basedir`` may be a symlink (a scratch disk), but a
    symlink standing for the ``name`` folder or a candidate is refused (``RunFolderError``), not
    followed: someone else may have planted it to send the run's files elsewhere.
    """
    parent = root.parent
    parent.parent.mkdir(parents=True, exist_ok=True)
    _refuse_symlink(parent)
    parent.mkdir(exist_ok=True)
    stamp = _stamp()
    stamped = root.name if root.name.startswith(stamp) else f"{root.name}_{stamp}"
    names = itertools.chain((root.name, stamped), (f"{stamped}_{n}" for n in itertools.count(1)))
    for name in names:
        try:
            (parent / name).mkdir()
        except FileExistsError:
            _refuse_symlink(parent / name)
            continue
        return parent / name
    raise AssertionError("unreachable: the candidate names never run out")


def _refuse_symlink(path: Path) -> None:
    if path.is_symlink():
        raise RunFolderError(
            f"{path} is a symbolic link (to {os.readlink(path)}); run folders are not created "
            "through a link under saving.basedir: remove it, or set saving.basedir to where the "
            "runs should go"
        )


class TextLog:
    """An append-only text logger: ``[MM-DD HH:MM:SS] INFO     message`` lines."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf8")  # noqa: SIM115 (open for the whole run)

    def info(self, message: str) -> None:
        self._file.write(f"[{datetime.now().strftime('%m-%d %H:%M:%S')}] INFO     {message}\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _prefixed(tag: str, values: dict) -> dict:
    return {f"{tag}/{name}": value for name, value in values.items()}


def _per(count: float, seconds: float) -> float:
    return count / seconds if seconds else float("nan")


def _fmt(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6f}"
    return str(value)


def grid_table(values: dict, columns_per_table: int = 6) -> str:
    """LightZero's horizontal grid table ``| Name | a | b |`` / ``| Value | ... |``, in chunks."""
    items = list(values.items())
    blocks = []
    for start in range(0, len(items), columns_per_table):
        chunk = items[start : start + columns_per_table]
        cells = [(k, _fmt(v)) for k, v in chunk]
        widths = [max(len(k), len(v)) for k, v in cells]
        head = "| Name  | " + " | ".join(k.ljust(w) for (k, _), w in zip(cells, widths)) + " |"
        rule = "|-------|-" + "-|-".join("-" * w for w in widths) + "-|"
        row = "| Value | " + " | ".join(v.ljust(w) for (_, v), w in zip(cells, widths)) + " |"
        blocks.append("\n".join((head, rule, row)))
    return "\n".join(blocks)


class Experiment:
    """Creates the folder and owns the text loggers, Fabric's loggers and results.json.

    ``loggers`` write the files of Lightning's ``TensorBoardLogger`` (``log/serial``, one event per
    call) and ``CSVLogger`` (``log/csv/version_<N>/metrics.csv``, a new version per resume: the
    logger rewrites an existing file) without importing Lightning (``event_logger``); the trainer
    sends every scalars point to both, the LightZero groups (``scalars``) to the TensorBoard stream
    alone.

    Starting (or resuming) in a folder deletes the temporary files of checkpoint writes that were
    killed there (``checkpoint.remove_temporary_files``) and notes them in the learner log.
    """

    def __init__(self, root: Path, config: RunConfig):
        from gpu_envs.runs.event_logger import CSVLogger, OneEventTensorBoardLogger

        self.root = root
        self.ckpt_dir = root / "ckpt"
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        self.collector = TextLog(root / "log" / "collector" / "collector_logger.txt")
        self.evaluator = TextLog(root / "log" / "evaluator" / "evaluator_logger.txt")
        self.learner = TextLog(root / "log" / "learner" / "learner_logger.txt")
        for leftover in remove_temporary_files(self.ckpt_dir):
            self.learner.info(f"[RANK0]: removed the unfinished checkpoint file {leftover}")
        # TensorBoard's writer thread drains its queue by itself every 10 s and fully at each
        # checkpoint (``flush``): a small queue would make the training loop wait for it.
        self.tensorboard = OneEventTensorBoardLogger(
            root / "log",
            name="serial",
            version="",
            default_hp_metric=False,
            max_queue=4096,
            flush_secs=10,
        )
        self.csv = CSVLogger(root / "log", name="csv")
        self.loggers: list[OneEventTensorBoardLogger | CSVLogger] = [self.tensorboard, self.csv]
        dump_yaml(config, root / "total_config.yaml")
        self.video_dir = root / "videos"

    def open_writers(self) -> None:
        """Create the loggers' writers now: TensorBoard's first use imports ~0.1 s of modules,
        which would otherwise land inside the first iteration of the run's clock."""
        self.tensorboard.experiment  # noqa: B018 (the property creates the writer)
        self.csv.experiment  # noqa: B018

    def log_models(self, models: dict) -> None:
        for tag, module in models.items():
            self.learner.info(f"[RANK0]: Policy '{tag}' network\n{module}")

    def scalars(self, group: str, iteration: int, env_step: int, values: dict[str, float]) -> None:
        """Each value against the iteration (``<group>_iter/``) and the env step
        (``<group>_step/``), in the TensorBoard stream."""
        kept = {
            name: value
            for name, value in values.items()
            if value is not None and not (isinstance(value, float) and math.isnan(value))
        }
        for axis, step in (("iter", iteration), ("step", env_step)):
            self.tensorboard.log_metrics({f"{group}_{axis}/{k}": v for k, v in kept.items()}, step)

    def log_window(
        self,
        records: list[IterationRecord],
        blocks: dict[str, dict],
        speed: dict,
        env_steps: int,
        collect_seconds: float,
        total_episodes: int,
        train_seconds: float,
    ) -> None:
        """A log window (``records``, reduced over the ranks; ``env_steps`` taken in it) as
        LightZero writes it: per policy the learner and collector tables and their scalars, then
        the speed scalars, and the console's ``blocks`` and ``speed`` as one line of
        results.json."""
        last = records[-1]
        iteration, env_step = last.iteration, last.env_step
        for tag in last.policies:
            averages = learner_summary(records, tag)
            self.learner.info(
                f"=== Training Iteration {iteration} Result (policy '{tag}') ===\n"
                f"{grid_table(averages)}"
            )
            self.scalars("learner", iteration, env_step, _prefixed(tag, averages))
            episodes = episode_summary(records, tag)
            collector = {
                "episode_count": episodes["episode_count"],
                "envstep_count": env_steps,
                "avg_envstep_per_episode": episodes["avg_envstep_per_episode"],
                "avg_envstep_per_sec": _per(env_steps, collect_seconds),
                "avg_episode_per_sec": _per(episodes["episode_count"], collect_seconds),
                "collect_time": collect_seconds,
                "reward_mean": episodes["reward_mean"],
                "reward_std": episodes["reward_std"],
                "reward_max": episodes["reward_max"],
                "reward_min": episodes["reward_min"],
                "total_envstep_count": env_step,
                "total_episode_count": total_episodes,
                "total_duration": train_seconds,
            }
            lines = "\n".join(f"{k}: {_fmt(v)}" for k, v in collector.items())
            self.collector.info(
                f"[RANK0]: collect end (iteration {iteration}, policy '{tag}'):\n{lines}"
            )
            self.scalars("collector", iteration, env_step, _prefixed(tag, collector))
        self.scalars(
            "speed", iteration, env_step, {k: v for k, v in speed.items() if k != "Iteration"}
        )
        self._results({"Iterations Completed": iteration, **blocks, "Perf. Stats": speed})

    def log_evaluation(
        self,
        iteration: int,
        env_step: int,
        result: dict,
        means: dict[str, float],
        train_seconds: float,
        ckpt_name: str,
    ) -> None:
        """An evaluation (``Evaluator.run``'s ``result``, each policy's mean return over the
        ranks in ``means``): a table and its scalars per policy; ``ckpt_name``: the checkpoint
        written with the evaluated weights."""
        seconds, envsteps = result["seconds"], result["envsteps"]
        for tag, returns in result["returns"].items():
            values = {
                "train_iter": iteration,
                "ckpt_name": ckpt_name,
                "episode_count": returns.numel(),
                "envstep_count": envsteps,
                "evaluate_time": seconds,
                "avg_envstep_per_episode": envsteps / returns.numel(),
                "avg_envstep_per_sec": envsteps / seconds,
                "avg_time_per_episode": seconds / returns.numel(),
                "reward_mean": means[tag],
                "reward_std": float(returns.std(unbiased=False)),
                "reward_max": float(returns.max()),
                "reward_min": float(returns.min()),
                "train_time_s": train_seconds,
            }
            self.evaluator.info(
                f"[EVALUATOR] evaluation at iteration {iteration} (policy '{tag}'):\n"
                f"{grid_table(values)}"
            )
            values.pop("ckpt_name")
            self.scalars("evaluator", iteration, env_step, _prefixed(tag, values))

    def _results(self, record: dict) -> None:
        with open(self.root / "results.json", "a", encoding="utf8") as handle:
            json.dump(record, handle)
            handle.write("\n")

    def flush(self) -> None:
        """Write every logged value to disk (waits for TensorBoard's writer thread)."""
        for logger in self.loggers:
            logger.save()

    def close(self) -> None:
        for logger in self.loggers:
            logger.finalize("success")
        for log in (self.collector, self.evaluator, self.learner):
            log.close()


class NullExperiment:
    """What ranks other than 0 hold: every writing method does nothing."""

    root = None
    ckpt_dir = None
    video_dir = None
    loggers: tuple = ()

    def __getattr__(self, name):
        return lambda *args, **kwargs: None
