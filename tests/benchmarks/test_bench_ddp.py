"""`gpu-envs bench ddp`: 1 vs 2 DDP processes of the CartPole trainer: one tiny round end to end
in a fresh process (the user's command), the arguments it refuses, the summary and table. No timed
assertions: the machines are shared."""

import json
import subprocess
import sys

import pytest

from gpu_envs.benchmarks import ddp_scaling as bench
from gpu_envs.cli import main


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_tiny_round_of_the_command(tmp_path):
    """Two training runs (1 process, then 2 under gloo), their speeds, the table and the record."""
    out = tmp_path / "ddp.json"
    command = [sys.executable, "-m", "gpu_envs.cli", "bench", "ddp", "--envs", "4"]
    command += ["--rounds", "1", "--steps-per-process", "64", "--max-wait", "0"]
    done = subprocess.run(
        [*command, "--json", str(out)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| envs per process | 1 process | 2 processes | 2 / 1 |" in done.stdout
    record = json.loads(out.read_text())
    assert record["bench"] == "ddp_scaling" and record["args"]["envs"] == [4]
    assert record["machine"]["cpus"] >= 1
    runs = record["runs"]
    assert [(r["round"], r["processes"]) for r in runs] == [(0, 1), (0, 2)]
    for r in runs:  # 2 iterations (the least) of 4 envs x 8 steps on every process
        assert r["iterations"] == 2 and r["env_steps"] == 2 * 4 * 8 * r["processes"]
        assert r["env_steps_per_s"] > 0 and r["loadavg_before"] >= 0
    (summary,) = record["summary"]
    assert summary["ratio"] == pytest.approx(
        runs[1]["env_steps_per_s"] / runs[0]["env_steps_per_s"]
    )
    assert list(tmp_path.iterdir()) == [out]  # the runs' folders were temporary


def test_the_arguments_it_refuses():
    with pytest.raises(SystemExit):  # argparse: integers >= 1
        main(["bench", "ddp", "--envs", "0,64"])
    with pytest.raises(SystemExit):
        main(["bench", "ddp", "--accelerator", "tpu"])
    with pytest.raises(SystemExit, match="--rounds and --steps-per-process must be >= 1"):
        main(["bench", "ddp", "--rounds", "0"])


def _run(round_, processes, envs, rate, load=None):
    return {
        "round": round_,
        "processes": processes,
        "envs_per_process": envs,
        "env_steps_per_s": rate,
        "background_busy_before": load,
    }


def test_the_summary_pairs_the_runs_by_round():
    """The ratio is the median of the per-round ratios, not the ratio of the medians."""
    runs = [
        _run(0, 1, 64, 100.0, 0.05),
        _run(0, 2, 64, 50.0),
        _run(1, 2, 64, 300.0, 0.3),
        _run(1, 1, 64, 200.0),
        _run(2, 1, 64, 400.0),
        _run(2, 2, 64, 400.0),
    ]
    (summary,) = bench.summarize(runs)
    assert summary["rates"] == {"1": [100.0, 200.0, 400.0], "2": [50.0, 300.0, 400.0]}
    assert (summary["median_1"], summary["median_2"]) == (200.0, 300.0)
    assert summary["round_ratios"] == [0.5, 1.5, 1.0]
    assert summary["ratio"] == 1.0  # (the medians' ratio would be 1.5)
    assert summary["max_background_load"] == 0.3
    table = bench.markdown([summary]).splitlines()
    assert table[2] == "| 64 | 200 | 300 | 1.00 | 0.50, 1.50, 1.00 | 30% |"
