"""``gpu-envs bench felt``: one command times the main job, one env and worker processes against
the peers, interleaved round by round."""

import json
import subprocess
import sys

import pytest

from gpu_envs.benchmarks import felt_speed, whole_command


def test_felt_reports_one_env_and_worker_processes_and_says_the_main_job_was_skipped():
    command = [
        *(sys.executable, "-m", "gpu_envs.cli", "bench", "felt"),
        *("--games", "CartPole-v1,Pendulum-v1", "--steps", "200", "--rounds", "2"),
        *("--workers", "1,2", "--worker-steps", "20", "--json", "-"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.loads(result.stdout)
    shapes = [(r["part"], r["game"], r.get("workers")) for r in document["records"]]
    assert shapes == [
        ("single", "CartPole-v1", None),
        ("single", "Pendulum-v1", None),
        ("workers", "CartPole-v1", 1),
        ("workers", "CartPole-v1", 2),
    ]
    for record in document["records"]:
        assert record["ours_us"] > 0 and record["gymnasium_us"] > 0 and record["ratio"] > 0
        assert [len(values) for values in record["rounds_us"].values()] == [2, 2]
    assert document["main_job"] == {"runs": [], "summary": {}}
    assert "main job vs PureJaxRL skipped: no --purejaxrl-python given" in result.stderr
    assert "| CartPole-v1 | 2 workers x 1 env |" in result.stderr


def test_the_main_job_alternates_with_purejaxrl_in_every_round_and_cache_state(
    monkeypatch, tmp_path, capsys
):
    (tmp_path / "ppo.py").write_text("")
    order = []

    def fake(impl, wall, train):
        def run(*args, cold=False):
            cold = cold or (impl == "purejaxrl" and args[-1] != jax_cache[0])
            order.append((impl, "cold" if cold else "warm"))
            return dict(wall_s=wall * (2 if cold else 1), train_s=train, best_eval=500.0)

        return run

    jax_cache = []
    fill = whole_command.fill_warm_caches
    monkeypatch.setattr(
        whole_command,
        "fill_warm_caches",
        lambda *args: (jax_cache.append(args[-1]), fill(*args)),
    )
    monkeypatch.setattr(whole_command, "run_ours", fake("gpu_envs", 3.0, 0.3))
    monkeypatch.setattr(whole_command, "run_purejaxrl", fake("purejaxrl", 4.0, 0.4))
    argv = ["--parts", "main-job", "--purejaxrl", str(tmp_path), "--purejaxrl-python"]
    assert felt_speed.main([*argv, sys.executable, "--cold", "--rounds", "2", "--json", "-"]) == 0
    assert order == [
        *(("gpu_envs", "warm"), ("purejaxrl", "warm")),  # filling the warm caches
        *(("gpu_envs", "warm"), ("purejaxrl", "warm"), ("gpu_envs", "cold"), ("purejaxrl", "cold")),
        *(("purejaxrl", "warm"), ("gpu_envs", "warm"), ("purejaxrl", "cold"), ("gpu_envs", "cold")),
    ]
    captured = capsys.readouterr()
    summary = json.loads(captured.out)["main_job"]["summary"]
    for measure in ("warm", "cold", "training"):
        assert summary[measure]["ratio"] == pytest.approx(0.75)
    table = captured.err
    assert "| main job, warm caches | whole process | 3.00 s | PureJaxRL 4.00 s | 0.75x |" in table
    assert (
        "| main job | training clock to 475 | 0.30 s | PureJaxRL 0.40 s | 0.75x | <= 0.6x: not"
        in (table)
    )


def test_a_game_outside_the_classic_ones_is_refused_naming_them():
    command = [sys.executable, "-m", "gpu_envs.cli", "bench", "felt", "--games", "Tag-v0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "expected comma-separated names among CartPole-v1, Pendulum-v1" in result.stderr
