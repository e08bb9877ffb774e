"""``gpu-envs bench felt-speed`` runs as a user runs it and reports both sides of both parts."""

import json
import subprocess
import sys


def test_felt_speed_reports_one_env_and_worker_processes_against_gymnasium():
    command = [
        *(sys.executable, "-m", "gpu_envs.cli", "bench", "felt-speed"),
        *("--games", "CartPole-v1,Pendulum-v1", "--steps", "200", "--rounds", "2"),
        *("--workers", "2", "--worker-steps", "20", "--json", "-"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.loads(result.stdout)
    shapes = [(r["part"], r["game"]) for r in document["records"]]
    assert shapes == [
        ("single", "CartPole-v1"),
        ("single", "Pendulum-v1"),
        ("workers", "CartPole-v1"),
    ]
    for record in document["records"]:
        assert record["ours_us"] > 0 and record["gymnasium_us"] > 0 and record["ratio"] > 0
        assert [len(values) for values in record["rounds_us"].values()] == [2, 2]
    assert "| CartPole-v1 | 2 workers x 1 env |" in result.stderr


def test_a_game_outside_the_classic_ones_is_refused_naming_them():
    command = [sys.executable, "-m", "gpu_envs.cli", "bench", "felt-speed", "--games", "Tag-v0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "expected comma-separated names among CartPole-v1, Pendulum-v1" in result.stderr
