"""What exists for WarpDrive's users, in one module (delete it and the rest still stands).

- The defaults mode (``defaults: warpdrive`` in a run config) in
  :mod:`gpu_envs.runs.warpdrive_defaults` (the run config's own layer).
- The Lightning notebook's callback names: ``CUDACallback`` (our ``EnvResetCallback``) and
  ``PerfStatsCallback`` (the speed block, from the run's own ``timing.SpeedMeter``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import lightning.pytorch as pl

from gpu_envs.lightning.module import EnvResetCallback
from gpu_envs.runs import console
from gpu_envs.runs.speed import SpeedMeter

if TYPE_CHECKING:
    from gpu_envs.lightning.module import TagLightningModule

#: The notebook's name for ``EnvResetCallback``.
CUDACallback = EnvResetCallback


class PerfStatsCallback(pl.Callback):
    """Prints the speed block (ms per iteration per phase, env-steps/s, agent-steps/s) and logs it:
    the run's own measure (``timing.SpeedMeter``) between two prints.

    Args:
        batch_size: env steps per iteration, as the notebook passes it
            (``wd_module.training_batch_size``); None: the module's. Checked against the module.
        num_iters: iterations of the run (``wd_module.num_iters``); None: the module's. Checked
            against the module.
        log_freq: print every ``log_freq`` iterations (and at the last one); None follows the
            module's ``saving.metrics_log_freq``.
    """

    def __init__(
        self,
        batch_size: int | None = None,
        num_iters: int | None = None,
        log_freq: int | None = None,
    ):
        if log_freq is not None and log_freq < 1:
            raise ValueError(f"log_freq must be >= 1 or None, got {log_freq}")
        self.batch_size, self.num_iters, self.log_freq = batch_size, num_iters, log_freq
        self._mark = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: TagLightningModule) -> None:
        for name, given, actual in (
            ("batch_size", self.batch_size, pl_module.training_batch_size),
            ("num_iters", self.num_iters, pl_module.num_iters),
        ):
            if given is not None and given != actual:
                raise ValueError(
                    f"PerfStatsCallback({name}={given}) but the module has {actual} "
                    f"(module.{'training_batch_size' if name == 'batch_size' else name}); "
                    "pass the module's value or leave it out"
                )

    def on_train_start(self, trainer: pl.Trainer, pl_module: TagLightningModule) -> None:
        run = pl_module.run
        self._mark = run.speed.mark(run.iteration, run.agent_steps)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: TagLightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        run = pl_module.run
        last = pl_module.iteration >= pl_module.num_iterations or (
            trainer.max_epochs is not None and trainer.current_epoch + 1 >= trainer.max_epochs
        )
        due = (
            pl_module.iteration % run.config.saving.metrics_log_freq == 0
            if self.log_freq is None
            else pl_module.iteration % self.log_freq == 0
        )
        if self._mark is None or not (due or last):
            return
        mark = run.speed.mark(run.iteration, run.agent_steps)
        speed = SpeedMeter.block(self._mark, mark, run.num_iterations, run.steps_per_iteration)
        self._mark = mark
        values = {f"perf/{name}": value for name, value in speed.items()}
        values["charts/SPS"] = speed["Mean env-steps per sec (total)"]
        pl_module.log_dict(
            {k: v for k, v in values.items() if isinstance(v, float) and math.isfinite(v)},
            on_step=True,
            on_epoch=False,
            batch_size=1,
        )
        pl_module.print(console.format_block(console.SPEED_TITLE, speed))
