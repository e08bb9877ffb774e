"""The main-job part of ``gpu-envs bench felt``: the whole-process timing, its cold caches,
PureJaxRL's time to 475 and the summary."""

from __future__ import annotations

import sys

import pytest

from gpu_envs.benchmarks import whole_command

_FAKE_TRAIN = """
import os
# cold: both compile caches point into the run's own (new, empty) folder
cold = all(
    os.environ.get(name, "").startswith(os.getcwd())
    for name in ("NUMBA_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")
)
print(f"training time: {0.42 if cold else 0.1} s for 20,480 env steps")
print("best evaluation: greedy mean return 500.00; ...")
"""


def _runs(ours: list[float], theirs: list[float], cache: str) -> list[dict]:
    return [
        dict(impl=impl, cache=cache, wall_s=wall, train_s=None, best_eval=None, round=i)
        for impl, walls in (("gpu_envs", ours), ("purejaxrl", theirs))
        for i, wall in enumerate(walls)
    ]


def test_summary_takes_medians_and_judges_each_cache_state_by_its_target():
    runs = _runs([4.0, 9.0, 5.0], [10.0, 11.0, 12.0], "warm")
    runs += _runs([30.0, 13.0, 14.0], [12.0, 12.0, 12.0], "cold")
    summary = whole_command.summarize(runs)
    assert summary["warm"]["ratio"] == pytest.approx(5.0 / 11.0)
    assert summary["warm"]["target_met"]  # <= 0.5
    assert summary["cold"]["ratio"] == pytest.approx(14.0 / 12.0)
    assert not summary["cold"]["target_met"]  # > 1
    for cache in ("warm", "cold"):
        assert cache in whole_command.markdown([dict(r, loadavg_before=0.0) for r in runs], summary)


def test_a_cold_run_of_ours_finds_empty_caches_and_its_figures_are_read(monkeypatch):
    monkeypatch.setattr(
        whole_command, "_gpu_envs_command", lambda: [sys.executable, "-c", _FAKE_TRAIN]
    )
    cold = whole_command.run_ours(seed=1, cold=True)
    assert cold["train_s"] == 0.42 and cold["best_eval"] == 500.0 and cold["wall_s"] > 0
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert whole_command.run_ours(seed=1, cold=False)["train_s"] == 0.1


def test_a_failed_process_is_an_error_naming_it():
    with pytest.raises(RuntimeError, match="exited with 3"):
        whole_command._timed([sys.executable, "-c", "raise SystemExit(3)"], ".", {})


def test_purejaxrls_time_to_475_and_best_evaluation_come_from_its_childs_line(tmp_path):
    child = tmp_path / "python"
    child.write_text(
        "#!/bin/sh\necho compiling\n"
        'echo \'{"seed": 1, "train_s": 0.51, "best_eval": 500.0, "total_train_s": 2.0}\'\n'
    )
    child.chmod(0o755)
    run = whole_command.run_purejaxrl(str(tmp_path), str(child), seed=1, cache=str(tmp_path))
    assert run["train_s"] == 0.51 and run["best_eval"] == 500.0 and run["child"]["seed"] == 1
    runs = [
        dict(impl="gpu_envs", cache="warm", wall_s=4.0, train_s=0.3),
        {**run, "impl": "purejaxrl", "cache": "warm"},
    ]
    summary = whole_command.summarize(runs)
    assert summary["training"]["ratio"] == pytest.approx(0.3 / 0.51)
    assert summary["training"]["target"] == 0.6 and summary["training"]["target_met"]
