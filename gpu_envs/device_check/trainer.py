"""``device-check``'s trainer rows: end-to-end env-steps/s of the bundled PPO on one device, and
on 2 GPUs against 1 (DDP).

The clock of a one-device row is the run's training clock (compiles and warm-up excluded,
evaluation paused) read at the end of the last update, after a device synchronise
(``gpu_envs.trainers.core.TrainingRun.update_seconds``): the final checkpoint, the closing of the
experiment folder and ``curves.png`` come after it and are left out, as they would weigh heavily
on a run of a few iterations. The DDP row's runs are fresh ``gpu-envs train`` commands (Fabric
launches the processes): their clock is read from the final checkpoint
(:func:`gpu_envs.benchmarks.ddp_scaling.train_speed`).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gpu_envs.benchmarks import report
from gpu_envs.benchmarks.ddp_scaling import train_speed
from gpu_envs.device_check.lean import SMALL_TAG
from gpu_envs.device_check.rows import Row


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


#: The DDP row's name.
DDP_ROW = "ddp 2 GPUs"


def ddp_skip_reason(device: str) -> str | None:
    """Why the DDP row cannot run here (fewer than 2 CUDA GPUs, or ``--device cpu``), or None."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < 2:
        return f"{gpus} CUDA GPU(s) here (torch.cuda.device_count()); the row needs 2 or more"
    if device == "cpu":
        return "--device cpu checks the CPU; the row trains on 2 CUDA GPUs"
    return None


def ddp_throughput(device: str, envs: int, iterations: int) -> list[Row]:
    """End-to-end env-steps/s of ``gpu-envs train cartpole`` on 2 GPUs (Fabric DDP over NCCL, one
    process per GPU, ``envs`` envs each) against 1 GPU, ``iterations`` iterations each (the
    preset, not compiled, no evaluation); with fewer than 2 GPUs, a row saying it was skipped and
    why (:func:`ddp_skip_reason`)."""
    setting = (
        f"cartpole preset, {envs} envs per GPU, {iterations} iterations, Fabric DDP (NCCL) on 2 "
        "GPUs vs 1"
    )
    record = {"kind": "throughput", "game": "cartpole", "processes": 2, "envs_per_process": envs}
    reason = ddp_skip_reason(device)
    if reason is not None:
        return [Row(DDP_ROW, setting, f"skipped: {reason}", "", {**record, "skipped": reason})]
    with tempfile.TemporaryDirectory() as folder:
        one, two = (train_speed(p, envs, iterations, Path(folder), "cuda") for p in (1, 2))
    ratio = two["env_steps_per_s"] / one["env_steps_per_s"]
    rate = report.format_rate
    text = (
        f"{rate(two['env_steps_per_s'])} env-steps/s on 2 GPUs, {rate(one['env_steps_per_s'])} "
        f"on 1: {ratio:.2f}x"
    )
    record |= {
        "env_steps_per_s": two["env_steps_per_s"],
        "one_gpu_env_steps_per_s": one["env_steps_per_s"],
        "ratio": ratio,
        "runs": [one, two],
    }
    return [Row(DDP_ROW, setting, text, "", record)]
