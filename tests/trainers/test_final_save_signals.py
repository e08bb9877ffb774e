"""Signals while a stopped run writes its final checkpoint, status and curves, or while the
process exits, are only noted: the run ends as documented (exit 143 or 130, the resume line,
curves.png), with no traceback. Real ``gpu-envs train`` processes and signals; the prelude only
makes the plot and the exit slow enough to be hit."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from gpu_envs.runs import run_control
from tests.helpers.cli_process import start_gpu_envs

SLOW_PLOT_AND_EXIT = """
import atexit, time
from gpu_envs.runs import curves
_write = curves.write_run_curves
def _slow(root):
    print("writing curves", flush=True)
    time.sleep(2)
    return _write(root)
curves.write_run_curves = _slow
atexit.register(lambda: (print("exiting", flush=True), time.sleep(2)))
"""
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


@pytest.mark.slow
@pytest.mark.parametrize(
    ("first", "while_plotting", "while_exiting"),
    [
        # a cluster's pre-emption sends SIGTERM again, then the user presses Ctrl-C twice
        (signal.SIGTERM, [signal.SIGTERM, signal.SIGINT, signal.SIGINT], [signal.SIGTERM]),
        # Ctrl-C three times, and once more as the process exits
        (signal.SIGINT, [signal.SIGINT, signal.SIGINT], [signal.SIGINT]),
    ],
)
def test_signals_during_the_final_save_are_noted_and_the_run_ends_as_documented(
    first, while_plotting, while_exiting, tmp_path
):
    proc = start_gpu_envs(
        *RUN, f"saving.basedir={tmp_path}", prelude=SLOW_PLOT_AND_EXIT, cwd=tmp_path
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[progress] iteration 3/"):
            proc.send_signal(first)
        elif line.startswith("writing curves"):
            for number in while_plotting:
                proc.send_signal(number)
        elif line.startswith("exiting"):
            for number in while_exiting:
                proc.send_signal(number)
            break
    output = "".join(lines) + proc.communicate(timeout=300)[0]
    name = signal.Signals(first).name
    assert proc.returncode == run_control.EXIT_CODES[name], output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    found = re.search(
        rf"^gpu-envs train: stopped by {name} at iteration (\d+)/\d+, saved (\S+); resume with: "
        r"gpu-envs train --resume (\S+)$",
        output,
        flags=re.M,
    )
    assert found, output
    folder = Path(found.group(3))
    assert Path(found.group(2)).is_file()
    assert (folder / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert run_control.read_status(folder)["status"] == "interrupted"
    assert "noted: the run is writing its final checkpoint, status and plot" in output
