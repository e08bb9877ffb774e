"""`gpu-envs bench train-cartpole`: a tiny-budget run end to end (record shape, "not reached"), and
the summary/table of runs that do and do not reach 475. No timed assertions: the machines are
shared."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("stable_baselines3")

from gpu_envs.benchmarks import train_cartpole as bench

RUN_KEYS = {
    "impl",
    "seed",
    "train_s",
    "steps",
    "best_eval",
    "total_train_s",
    "total_steps",
    "wall_s",
    "background_busy_before",
    "loadavg_before",
    "loadavg_after",
}


def test_tiny_budget_run_reports_not_reached(tmp_path):
    out = tmp_path / "out.json"
    command = [
        sys.executable,
        "-m",
        "gpu_envs.cli",
        "bench",
        "train-cartpole",
        "--seeds",
        "1",
        "--timesteps",
        "512",
        "--override",
        "trainer.total_timesteps=512",
        "--max-wait",
        "0",
        "--json",
        str(out),
    ]
    completed = subprocess.run(command, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["bench"] == "train_cartpole"
    assert record["machine"]["cpus"] >= 1 and record["machine"]["cpu_model"]
    assert set(record["machine"]["versions"]) >= {
        "gpu-envs",
        "torch",
        "stable-baselines3",
        "gymnasium",
    }
    assert [r["impl"] for r in record["runs"]] == ["gpu_envs", "sb3"]
    for run in record["runs"]:
        assert set(run) == RUN_KEYS
        # 512 steps from these seeds: evaluated once at the end, far from 475.
        assert run["train_s"] is None and run["steps"] is None
        assert run["best_eval"] < 475 and run["total_steps"] >= 512
        assert 0 < run["total_train_s"] <= run["wall_s"]
    summary = record["summary"]
    assert summary["per_seed"] == [dict(seed=1, gpu_envs_s=None, sb3_s=None, ratio=None)]
    assert summary["ratio_of_medians"] is None and summary["median_per_seed_ratio"] is None
    assert summary["gpu_envs_all_reached"] is False and summary["target_met"] is False
    assert "| gpu_envs | 1 | not reached |" in completed.stdout
    assert "gpu_envs reached 475 on 0/1 seeds" in completed.stdout


def _run(impl, seed, train_s):
    return dict(
        impl=impl,
        seed=seed,
        train_s=train_s,
        steps=None if train_s is None else 4096,
        best_eval=500.0 if train_s is not None else 300.0,
        total_train_s=train_s or 9.0,
        total_steps=4096,
        wall_s=12.0,
        background_busy_before=0.01,
        loadavg_before=0.5,
        loadavg_after=1.0,
    )


def test_summary_and_table_with_reached_and_not_reached_seeds():
    runs = [
        _run("gpu_envs", 1, 2.0),
        _run("sb3", 1, 10.0),
        _run("sb3", 2, 20.0),
        _run("gpu_envs", 2, 4.0),
        _run("gpu_envs", 3, None),
        _run("sb3", 3, 30.0),
    ]
    summary = bench.summarize(runs)
    assert [row["ratio"] for row in summary["per_seed"]] == [
        pytest.approx(0.2),
        pytest.approx(0.2),
        None,
    ]
    # Seed 3 never reached 475: it counts as infinitely slow, so the median of 2, 4, inf is 4.
    assert summary["median_gpu_envs_s"] == 4.0 and summary["median_sb3_s"] == 20.0
    assert summary["ratio_of_medians"] == pytest.approx(0.2)
    assert summary["median_per_seed_ratio"] == pytest.approx(0.2)
    assert summary["gpu_envs_seeds_reached"] == 2 and not summary["gpu_envs_all_reached"]
    assert summary["sb3_seeds_reached"] == 3 and not summary["target_met"]  # a seed was not reached
    table = bench.markdown(runs, summary)
    assert "| 3 | not reached | 30.00 | – |" in table
    assert "| median | 4.00 | 20.00 | 0.200 |" in table
    assert "gpu_envs reached 475 on 2/3 seeds, sb3 on 3/3" in table
    assert "median sb3 s ≤ 0.25: 0.200 (not met)" in table


def test_target_is_the_ratio_of_the_medians_when_every_seed_reaches():
    runs = [
        _run("gpu_envs", 1, 2.0),
        _run("sb3", 1, 4.0),
        _run("gpu_envs", 2, 2.0),
        _run("sb3", 2, 10.0),
        _run("gpu_envs", 3, 3.0),
        _run("sb3", 3, 12.0),
    ]
    summary = bench.summarize(runs)
    # per seed 0.5, 0.2, 0.25 (median 0.25); medians 2 and 10: 0.2
    assert summary["median_per_seed_ratio"] == pytest.approx(0.25)
    assert summary["ratio_of_medians"] == pytest.approx(0.2) and summary["target_met"]


def test_sb3_runs_are_reproducible_per_seed():
    # Seeded training and a seeded evaluation env: the same seed evaluates the same episodes.
    first, second = (bench.run_sb3(3, timesteps=1024, eval_freq=256, episodes=3) for _ in range(2))
    assert first["best_eval"] is not None and first["total_steps"] == 1024
    assert (first["best_eval"], first["steps"]) == (second["best_eval"], second["steps"])
