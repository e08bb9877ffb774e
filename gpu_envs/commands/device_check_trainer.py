"""``device-check``'s trainer rows: end-to-end env-steps/s of the bundled PPO on one device.

The clock is the run's training clock (compiles and warm-up excluded, evaluation paused) read at
the end of the last update, after a device synchronise
(``gpu_envs.trainers.core.TrainingRun.update_seconds``): the final checkpoint, the closing of the
experiment folder and ``curves.png`` come after it and are left out, as they would weigh heavily
on a run of a few iterations.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Sequence

from gpu_envs.benchmarks import report
from gpu_envs.commands.device_check_lean import SMALL_TAG
from gpu_envs.commands.device_check_rows import Row


def trainer_throughput(
    device: str,
    iterations: int,
    overrides: Sequence[str] = (),
    game: str = "tag",
    cuda_graphs: bool | None = None,
) -> list[Row]:
    """End-to-end env-steps/s of ``gpu-envs train <game>`` (the bundled preset; Tag's is the seed
    run config) with Fabric on ``device``'s kind: ``iterations`` of rollout, advantages and
    update, evaluations excluded.

    ``overrides`` (dotted ``key=value``) change the config, e.g. to shrink it for a test;
    ``cuda_graphs`` (None: the config's) turns the graph rollouts on or off. The run's console
    output goes to stderr; its experiment folder to a temporary folder.
    """
    import torch

    from gpu_envs.runs.config import RunConfig, apply_overrides
    from gpu_envs.runs.presets import preset
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric

    # (the simulated device's trainer runs on the CPU: Fabric needs a real GPU for "cuda")
    accelerator = "cuda" if device != "cpu" and torch.cuda.is_available() else "cpu"
    with tempfile.TemporaryDirectory() as folder:
        data = apply_overrides(preset(game), list(overrides))
        batch = data["trainer"]["train_batch_size"]
        data = apply_overrides(
            data,
            [
                f"trainer.accelerator={accelerator}",
                "trainer.devices=1",
                f"trainer.total_timesteps={iterations * batch}",
                "trainer.progress_bar=false",
                f"saving.basedir={folder}",
                *([] if cuda_graphs is None else [f"trainer.cuda_graphs={cuda_graphs}"]),
            ],
        )
        config = RunConfig.from_dict(data)
        with contextlib.redirect_stdout(sys.stderr):
            trainer = Trainer(make_fabric(config), config)
            result = trainer.fit()
    if trainer.update_seconds is None:
        raise RuntimeError(
            f"the {game} run ended before its last iteration ({result['reason']}): no training "
            "time to report"
        )
    graphs = trainer.collector.graph is not None and trainer.collector.graph.graph is not None
    rate = result["env_steps"] / trainer.update_seconds
    setting = (
        f"{'seed run config' if game == 'tag' else game + ' preset'}, {result['iterations']} "
        f"iterations, Fabric on {accelerator}, cuda_graphs={graphs}"
    )
    text = (
        f"{report.format_rate(rate)} env-steps/s ({result['env_steps']} env steps in "
        f"{trainer.update_seconds:.2f} s; {result['train_seconds']:.2f} s with the final save "
        "and plot)"
    )
    record = {
        "kind": "throughput",
        "game": game,
        "cuda_graphs": graphs,
        "env_steps_per_s": rate,
        "update_seconds": trainer.update_seconds,
        **result,
    }
    return [Row("trainer throughput", setting, text, "", record)]


def trainer_overrides(game: str, small: bool) -> list[str]:
    """Overrides of the --full trainer rows: no evaluation; with ``small`` a tiny run."""
    overrides = ["evaluation.eval_freq=0"]
    if small:
        overrides += ["trainer.num_envs=2", "trainer.train_batch_size=8", "trainer.compile=false"]
        if game == "tag":
            overrides += [f"env.{key}={value}" for key, value in SMALL_TAG.items()]
    return overrides
