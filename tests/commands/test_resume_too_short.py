"""A resume refused for being too short (``--resume RUN --total-timesteps N``, the run past N)
changes nothing in the run folder: the run's own printed resume command still resumes it. Real
``gpu-envs train`` processes and signals."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.helpers.cli_process import run_gpu_envs, start_gpu_envs

RUN = [
    "train",
    "cartpole",
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=100000000",
    "trainer.compile=false",
    "trainer.progress_bar=true",
    "saving.progress_seconds=0.001",  # a progress line after every iteration (no terminal)
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
]
RESUME_LINE = (
    r"gpu-envs train: stopped by SIGTERM at iteration (\d+)/\d+, saved \S+; resume with: "
    r"gpu-envs train --resume (\S+)"
)


def _stop_after(words: list[str], seen: str, cwd: Path) -> str:
    """Run ``gpu-envs WORDS`` until a line starts with ``seen``, SIGTERM it; its output, checked
    to end with the resume line and exit status 143."""
    proc = start_gpu_envs(*words, cwd=cwd)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(seen):
            proc.send_signal(signal.SIGTERM)
            break
    output = "".join(lines) + proc.communicate(timeout=300)[0]
    assert proc.returncode == 143, output
    assert re.fullmatch(RESUME_LINE, output.strip().splitlines()[-1]), output
    return output


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of the run folder but its lock (which holds the last holder's PID)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and p.name != "run.lock"
    }


@pytest.mark.slow
def test_a_too_short_resume_changes_nothing_and_the_printed_resume_still_works(tmp_path):
    output = _stop_after([*RUN, f"saving.basedir={tmp_path}"], "[progress] iteration 3/", tmp_path)
    found = re.fullmatch(RESUME_LINE, output.strip().splitlines()[-1])
    assert found
    iteration, folder = int(found.group(1)), Path(found.group(2))
    before = _files(folder)

    refused = run_gpu_envs("train", "--resume", str(folder), "--total-timesteps", "64")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    line = refused.stderr.strip().splitlines()[-1]
    assert line.startswith("gpu-envs train: error: --resume: ") and line.endswith(
        f"there is nothing left to train: give a longer run (--total-timesteps more than "
        f"{iteration * 32})"
    ), line
    assert _files(folder) == before  # total_config.yaml, status, logs: not a byte changed

    # the command the run printed resumes it (before: "there is nothing left to train")
    resumed = _stop_after(["train", "--resume", str(folder)], "[progress] iteration", tmp_path)
    assert f"at iteration {iteration} (env step {iteration * 32})" in resumed
