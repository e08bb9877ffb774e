"""`gpu_envs.benchmarks.step_overhead` (`gpu-envs bench overhead`) at tiny sizes in a fresh
process: both parts' rows, ratios and notes. No timed assertions: the machines are shared."""

import json
import subprocess
import sys

import numba
import pytest

from gpu_envs.benchmarks import step_overhead


def test_both_parts_run_at_tiny_sizes_in_a_fresh_process(tmp_path):
    out = tmp_path / "overhead.json"
    command = [
        sys.executable,
        "-m",
        "gpu_envs.benchmarks.step_overhead",
        "--num-envs",
        "16,4096",
        "--rounds",
        "2",
        "--round-seconds",
        "0.01",
        "--busy",
        "1",
        "--json",
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(out.read_text())
    assert document["benchmark"] == "overhead"
    records = document["records"]
    overhead = [r for r in records if r["part"] == "overhead"]
    assert [(r["num_envs"], r["row"]) for r in overhead] == [
        (n, row) for n in (16, 4096) for row in step_overhead.OVERHEAD_ROWS
    ]
    assert all(len(r["repeat_rates"]) == 2 and r["us_per_step"] > 0 for r in records)
    assert all(r["ratio"] == 1.0 for r in overhead if r["row"] == "bare")
    assert "| envs | row | µs / step | M env-steps/s | speed / bare kernel |" in done.stdout
    parallel = [r for r in records if r["part"] == "parallel"]
    assert any("16 envs skipped" in note for note in document["notes"])
    if numba.config.NUMBA_NUM_THREADS < 2:  # (the child has the same numba settings)
        assert parallel == []
        return
    assert [r["row"] for r in parallel] == list(step_overhead.PARALLEL_ROWS)
    assert {(r["num_envs"], r["busy"]) for r in parallel} == {(4096, 1)}
    assert {r["adaptive_ended_on"] for r in parallel} <= {"parallel", "serial"}
    assert all(r["ratio"] == 1.0 for r in parallel if r["row"] == "serial")
    assert "speed / serial loop |" in done.stdout


def test_bad_arguments_are_refused_naming_them(capsys):
    with pytest.raises(SystemExit):
        step_overhead.main(["--parts", "overhead,nope", "--num-envs", "4"])
    assert "--parts: expected comma-separated names among overhead, parallel" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit, match="--rounds must be >= 1"):
        step_overhead.main(["--rounds", "0", "--num-envs", "4"])
