"""The CleanRL-style PPO example in docs/examples runs a few iterations from the command line."""

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "cleanrl_ppo_cartpole.py"


def test_cleanrl_ppo_example_runs_a_few_iterations():
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
    }  # a tiny MLP: one thread is fastest on a shared CPU
    result = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--total-timesteps",
            "768",
            "--num-envs",
            "4",
            "--num-steps",
            "64",
            "--update-epochs",
            "2",
            "--device",
            "cpu",
            "--seed",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = re.findall(
        r"^iteration (\d+)/(\d+) global_step=(\d+) episodes=(\d+) mean_return=([\d.]+)",
        result.stdout,
        flags=re.MULTILINE,
    )
    assert [(int(i), int(n), int(step)) for i, n, step, _, _ in lines] == [
        (1, 3, 256),
        (2, 3, 512),
        (3, 3, 768),
    ]
    for _, _, _, episodes, mean_return in lines:
        # CartPole episodes of a barely trained policy: +1 per step, at least 8 steps long.
        assert int(episodes) > 0 and 8.0 <= float(mean_return) <= 500.0


def test_cleanrl_ppo_example_rejects_too_few_timesteps():
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--total-timesteps", "10"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode != 0 and "--total-timesteps must be at least" in result.stderr
