"""The first minutes of ``gpu-envs train``: which gradient step trains is said before the first
iteration (on one process the analytic step: nothing compiles); a torch.compile of the gradient
step is said before it starts and timed when it ends, once per process; library users see nothing
(an INFO log)."""

import logging
import re
import subprocess
import sys

import pytest

from gpu_envs.engine import first_compile

STEP_LINE = (
    "gradient step of policy 'agent': analytic (the loss's gradient written out, torch's fused "
    "Adam; nothing to compile)"
)
#: One iteration of 8 envs x 8 steps, no evaluation.
TINY_RUN = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.total_timesteps=64",
    "trainer.progress_bar=false",
    "evaluation.eval_freq=0",
]


@pytest.mark.parametrize("compile", ["true", "false"])
def test_gpu_envs_train_says_which_gradient_step_trains(tmp_path, compile):
    """In a fresh ``gpu-envs train cartpole``: after the banner, the analytic step's line, then
    the first iteration; with ``trainer.compile`` true or false, no compile line."""
    result = subprocess.run(
        [sys.executable, "-m", "gpu_envs.cli", "train", "cartpole", *TINY_RUN]
        + [f"trainer.compile={compile}", f"saving.basedir={tmp_path}"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    banner = next(i for i, line in enumerate(lines) if line.startswith("gpu-envs train: cartpole"))
    first_iteration = next(i for i, line in enumerate(lines) if line.startswith("[iter 1 "))
    assert not any("torch.compile" in line or "compiled in" in line for line in lines)
    assert lines.count(STEP_LINE) == 1
    assert banner < lines.index(STEP_LINE) < first_iteration


def test_timed_speaks_the_first_time_only_and_not_after_a_failure(monkeypatch, caplog):
    monkeypatch.setattr(first_compile, "_checked", set())
    monkeypatch.setattr(first_compile.LOGGER, "propagate", True)  # to caplog, CLI set-up or not
    with caplog.at_level(logging.INFO, logger="gpu_envs.compile"):
        with first_compile.timed("the thing"):
            pass
        with first_compile.timed("the thing"):
            pass
        with pytest.raises(RuntimeError), first_compile.timed("the other thing"):
            raise RuntimeError("no compiler")
    # each record once (one object), however many handlers of this test session it reached
    messages = [record.getMessage() for record in dict.fromkeys(caplog.records)]
    assert messages[0] == "compiling the thing ..."
    assert re.fullmatch(r"compiled in \d+\.\d s", messages[1])
    assert messages[2:] == ["compiling the other thing ..."]
