"""A resume reads the checkpoint it continues from once (a Tag checkpoint is megabytes), however
``--resume`` names it: the search for the run, its folder or the file; a damaged newer file it
skips is read once too."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs import run_control
from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers.fabric_loop import train

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.total_timesteps=192",  # 3 iterations
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
    "saving.metrics_log_freq=1000",
    "saving.model_params_save_freq=1",
]  # no saving.tag: `--resume` alone searches the runs of the config


def _stopped_run(tmp_path: Path, newest: str) -> tuple[RunConfig, Path]:
    """A CartPole run that looks stopped after iteration 2: its iteration_3 checkpoint
    ``"removed"`` or ``"damaged"`` (truncated), its status ``interrupted``."""
    config = RunConfig.from_dict(
        apply_overrides(preset("cartpole"), [*SMALL, f"saving.basedir={tmp_path}"])
    )
    folder = Path(train(config)["experiment"])
    last = ckpt.iteration_path(folder / "ckpt", 3)
    if newest == "removed":
        last.unlink()
    else:
        last.write_bytes(last.read_bytes()[:1000])
    run_control.write_status(folder, "interrupted")
    return config, folder


def _count_reads(monkeypatch) -> Counter:
    """The files ``torch.load`` reads from now on, by name, with how often."""
    reads: Counter = Counter()
    real = torch.load

    def counted(file, *args, **kwargs):
        reads[Path(file).name if isinstance(file, str | Path) else repr(file)] += 1
        return real(file, *args, **kwargs)

    monkeypatch.setattr(torch, "load", counted)
    return reads


@pytest.mark.parametrize("named_by", ["search", "folder", "file"])
def test_a_resume_reads_its_checkpoint_once(tmp_path, monkeypatch, capsys, named_by):
    config, folder = _stopped_run(tmp_path, "removed")
    resume = {
        "search": True,
        "folder": str(folder),
        "file": str(ckpt.iteration_path(folder / "ckpt", 2)),
    }[named_by]
    reads = _count_reads(monkeypatch)
    summary = train(config, resume=resume)
    assert "Resuming from" in capsys.readouterr().out
    assert summary["iterations"] == 3
    assert reads == {"iteration_2.pth.tar": 1}


def test_a_damaged_newest_checkpoint_is_read_once_too(tmp_path, monkeypatch, capsys):
    config, folder = _stopped_run(tmp_path, "damaged")
    reads = _count_reads(monkeypatch)
    with pytest.warns(UserWarning, match="skipping .*iteration_3.pth.tar: checkpoint .* corrupt"):
        summary = train(config, resume=True)
    assert "at iteration 2 (env step 128)" in capsys.readouterr().out
    assert summary["iterations"] == 3
    assert reads == {"iteration_3.pth.tar": 1, "iteration_2.pth.tar": 1}
