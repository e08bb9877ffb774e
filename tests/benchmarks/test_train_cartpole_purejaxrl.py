"""``gpu-envs bench train-cartpole-purejaxrl``: its summary and its refusal of a wrong folder (the
runs themselves need PureJaxRL's JAX interpreter, which the test venv does not hold)."""

import subprocess
import sys

from gpu_envs.benchmarks.train_cartpole_purejaxrl import summarize


def _run(impl, seed, train_s, steps, rate):
    return dict(impl=impl, seed=seed, train_s=train_s, steps=steps, env_steps_per_s=rate)


def test_summary_medians_count_a_seed_that_never_reached_475_as_infinitely_slow():
    runs = [
        _run("gpu_envs", 1, 0.5, 20_000, 50_000.0),
        _run("purejaxrl", 1, 2.0, 70_000, 150_000.0),
        _run("gpu_envs", 2, None, None, 40_000.0),
        _run("purejaxrl", 2, 3.0, 80_000, 140_000.0),
        _run("gpu_envs", 3, 0.7, 30_000, 60_000.0),
        _run("purejaxrl", 3, 4.0, 90_000, 160_000.0),
    ]
    summary = summarize(runs)
    assert summary["median_train_s"] == {"gpu_envs": 0.7, "purejaxrl": 3.0}
    assert summary["time_ratio"] == 0.7 / 3.0 and summary["target_met"]
    assert summary["throughput_ratio"] == 50_000.0 / 150_000.0
    slow = [
        dict(r, train_s=None) if r["impl"] == "gpu_envs" and r["seed"] != 1 else r for r in runs
    ]
    assert summarize(slow)["time_ratio"] is None and not summarize(slow)["target_met"]


def test_a_folder_without_ppo_py_is_refused_by_name(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_envs.cli",
            "bench",
            "train-cartpole-purejaxrl",
            "--purejaxrl",
            str(tmp_path),
            "--purejaxrl-python",
            sys.executable,
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert f"--purejaxrl {tmp_path}: no ppo.py there" in done.stderr
