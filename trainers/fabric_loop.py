"""The Fabric driver: ``gpu-envs train``'s trainer, on one process or many (DDP).

``Trainer.fit`` is the training loop: ``core.TrainingRun.iterate`` (rollout, learning, evaluation,
logs, checkpoints) until it says the run ends, with SIGINT/SIGTERM asking it to save and stop and
the progress on the console. Fabric adds the launch (``make_fabric``: devices, nodes, strategy;
``fabric run`` too), the DDP wrapping of every trained policy, its collectives and its loggers.
"""

from __future__ import annotations

import os

import torch

from gpu_envs.runs import console, run_control
from gpu_envs.runs.config import RunConfig
from gpu_envs.trainers.core import STOPPED, TrainingRun


def make_fabric(config: RunConfig):
    """A launched ``lightning.fabric.Fabric`` from the trainer section (``fabric run``'s flags
    win)."""
    from lightning.fabric import Fabric
    from lightning.fabric.plugins import Precision

    tc = config.trainer
    if os.environ.get("LT_CLI_USED") == "1":
        fabric = Fabric()  # `fabric run` created the processes; Fabric() joins them (no launch())
    else:
        accelerator = "cuda" if tc.accelerator == "gpu" else tc.accelerator
        fabric = Fabric(
            accelerator=accelerator,
            devices=tc.devices,
            strategy=tc.strategy,
            num_nodes=tc.num_nodes,
        )
        fabric.launch()
    if type(fabric.strategy.precision) is not Precision:
        raise ValueError(
            f"the trainers run in 32-bit precision (fabric run --precision 32-true), got "
            f"{type(fabric.strategy.precision).__name__}"
        )
    return fabric


class Trainer(TrainingRun):
    """PPO/A2C for every policy of ``config`` over its game, on ``fabric``.

    ``resume``: see ``run_control.resolve_resume``. Metrics go to the experiment folder's loggers
    (rank 0) and to any logger the caller gave the Fabric. Rank 0 locks the run folder
    (``run_control.FolderLock``) until the run ends: a resumed one before any work, so that a
    second run of the folder is refused at once.
    """

    def __init__(self, fabric, config: RunConfig, resume=None):
        self.fabric = fabric
        writer = fabric.global_rank == 0
        resume_path, root = run_control.resolve_resume(config, resume, mark_crashed=writer)
        resumed = resume_path is not None
        # a resumed folder is locked before any work (one still to create, by ``open_folder``)
        lock = run_control.FolderLock(root) if resumed and writer and root.is_dir() else None
        try:
            super().__init__(
                config,
                fabric.device,
                dist=fabric,
                setup=fabric.setup,
                resume=resume_path,
                log_scalars=self._log_to_fabric if fabric.loggers else None,
                folder_lock=lock,
            )
            self.open_folder(root if resumed else None)
            if self.rank == 0:
                print(console.banner(self), flush=True)  # before compiling: a run says what it is
            try:
                self.compile_steps(fabric.backward)
            except KeyboardInterrupt:
                self.discard_if_empty()
                raise
        except BaseException:
            self.release_folder()
            raise

    def _log_to_fabric(self, metrics: dict, step: int, records: list) -> None:
        self.fabric.log_dict(metrics, step=step)

    def fit(self) -> dict:
        """Train until ``num_iterations``, until the evaluation reaches ``stop_value``, or until
        SIGINT/SIGTERM (then save and return; the summary's ``status`` says which). A run that an
        exception ends (a second Ctrl-C, an error) is marked ``aborted`` or ``failed``."""
        try:
            self.start()
            progress = console.Progress(
                self.num_iterations,
                self.iteration,
                self.config.trainer.progress_bar and self.rank == 0,
                self.config.saving.progress_seconds,
                self.env_step,
            )
            self.say = progress.print if self.rank == 0 else _silent
            why = None
            with run_control.StopRequest(self.say) as stop_request:
                try:
                    while why is None:
                        why = self.iterate(lambda: stop_request.signal_name is not None)
                        progress.advance(self.iteration, self.env_step, self.last_returns)
                except BaseException as error:
                    self.fail(error)  # while the StopRequest holds off another Ctrl-C
                    raise
                finally:
                    progress.close()
                    self.experiment.close()
            # a stop asked on another rank only: its signal is not known here
            signal_name = (stop_request.signal_name or "SIGTERM") if why == STOPPED else None
            return self.finish(why, signal_name)
        except BaseException as error:
            self.fail(error)  # in start() or finish(): nothing once the status says how it ended
            raise


def _silent(text: str) -> None:
    """What ranks other than 0 print."""


def train(config: RunConfig, resume=None) -> dict:
    """Launch Fabric from ``config.trainer`` and run the trainer; returns a summary dict."""
    if config.trainer.torch_threads:
        torch.set_num_threads(config.trainer.torch_threads)
    trainer = Trainer(make_fabric(config), config, resume)
    try:
        return trainer.fit()
    except KeyboardInterrupt:  # a second Ctrl-C: no checkpoint now; a new run without any goes
        trainer.discard_if_empty()
        raise
