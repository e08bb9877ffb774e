"""Seeds past 2**32 (issue 44, item 4): the global generators take every seed the config takes,
and a real training run with one trains."""

import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lightning.fabric.utilities.seed import seed_everything as lightning_seed_everything

from gpu_envs.engine.validation import MAX_SEED
from gpu_envs.trainers.seeding import seed_everything


def _draws() -> tuple:
    return torch.rand(3).tolist(), np.random.random(3).tolist(), random.random()


@settings(max_examples=200, deadline=None)
@given(seed=st.one_of(st.integers(0, 2**32 - 1), st.integers(2**32, MAX_SEED + 64)))
def test_every_seed_seeds_the_generators_the_same_each_time(seed):
    seed_everything(seed)
    first = _draws()
    seed_everything(seed)
    assert _draws() == first
    assert torch.initial_seed() == seed  # torch takes the seed itself: seeds 2**32 apart differ


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_seeds_below_2_to_the_32_seed_as_lightning_does(seed):
    lightning_seed_everything(seed, verbose=False)
    expected = _draws()
    seed_everything(seed)
    assert _draws() == expected


@pytest.mark.slow
def test_gpu_envs_train_runs_with_a_seed_past_2_to_the_32(tmp_path):
    """The user's command, with a tiny budget: it trained, evaluated with a large evaluation seed
    too, and wrote its checkpoint."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_envs.cli",
            "train",
            "cartpole",
            "trainer.seed=4294967296",
            "evaluation.seed=9223372036854775000",
            "trainer.num_envs=4",
            "trainer.train_batch_size=32",
            "trainer.total_timesteps=64",
            "trainer.compile=false",
            "trainer.progress_bar=false",
            "evaluation.eval_freq=1",
            "evaluation.num_episodes=2",
            f"saving.basedir={tmp_path}",
            "saving.tag=run",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NUMBA_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "seeds 9223372036854775000..9223372036854775001" in result.stdout
    assert (tmp_path / "cartpole_ppo" / "run" / "ckpt" / "iteration_2.pth.tar").is_file()


@pytest.mark.parametrize("seed", [MAX_SEED, MAX_SEED - 2])
def test_a_seed_whose_env_seeds_pass_the_engines_range_is_refused_by_the_run(seed):
    """With ``trainer.devices: auto`` only the launch knows the processes: the run's own
    ``envs_per_rank`` refuses, naming the field."""
    from gpu_envs.runs.config import ConfigError, RunConfig, apply_overrides
    from gpu_envs.runs.presets import preset
    from gpu_envs.trainers.core import TrainingRun

    data = apply_overrides(
        preset("cartpole"),
        ["trainer.devices=auto", f"trainer.seed={seed}", "trainer.num_envs=4"],
    )
    data["trainer"]["train_batch_size"] = 4
    with pytest.raises(ConfigError, match=r"^trainer[.]seed: .*at most 9223372036854775804"):
        TrainingRun(RunConfig.from_dict(data), torch.device("cpu"))
