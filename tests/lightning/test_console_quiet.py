"""The Lightning notebook's flow in a fresh process shows none of Lightning's install tips and
deprecation warnings; importing the module silences nothing (only building one does)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

NOTEBOOK = """
import sys
from pathlib import Path

import pytest
from lightning.pytorch import Trainer
from gpu_envs import TagEnv
from gpu_envs.lightning.module import TagLightningModule
from gpu_envs.lightning.warpdrive import CUDACallback, PerfStatsCallback
from tests.helpers.seed_run_config import small_seed_run_config

run_config = small_seed_run_config(Path(sys.argv[1]))
env = TagEnv(num_envs=run_config["trainer"]["num_envs"], device="cpu", **run_config["env"])
module = TagLightningModule(env=env, config=run_config)
perf = PerfStatsCallback(batch_size=module.training_batch_size, num_iters=module.num_iters)
trainer = Trainer(accelerator="cpu", devices=1, callbacks=[CUDACallback(module=module), perf],
                  max_epochs=module.num_iters, log_every_n_steps=1, default_root_dir=sys.argv[1])
trainer.fit(module)
module.graceful_close()
"""

IMPORT_ONLY = """
import logging, warnings
import gpu_envs.lightning.module
from gpu_envs.runs.console import NOISE_LINES, NOISE_WARNINGS
messages = {f[1].pattern for f in warnings.filters if f[1] is not None}
assert not messages & set(NOISE_WARNINGS), "warning filters added on import"
assert not any(logging.getLogger(n).filters for n, _ in NOISE_LINES), "log filters on import"
gpu_envs.runs.console.hush_third_party()  # (what building a module does: the check can fail)
messages = {f[1].pattern for f in warnings.filters if f[1] is not None}
assert set(NOISE_WARNINGS) <= messages
"""


@pytest.mark.slow
def test_the_notebook_flow_shows_no_lightning_tips_or_deprecations(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", NOTEBOOK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    console = done.stdout + done.stderr
    assert "Training is complete!" in console
    assert "Seed set to " in console  # the seed a run can be repeated with (the notebook's line)
    for noise in ("Tip:", "litlogger", "litmodels", "deprecated", "Warning"):
        assert noise not in console, (noise, done.stderr)


def test_importing_the_module_silences_nothing():
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ONLY], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
