"""The GPU run's driver: each part in its own process, in its own time, whatever the others do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from gpu_envs.device_check import parts
from gpu_envs.device_check.plan import PARTS

ROOT = Path(__file__).resolve().parents[2]


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_crash_or_a_hang_in_one_part_does_not_stop_the_next(monkeypatch, tmp_path):
    monkeypatch.setattr(parts, "GRACE_S", 0.5)
    commands = {
        "crash": python("import os; os.abort()"),
        "hang": python("import time; time.sleep(60)"),
        "deaf": python("import signal as s, time; s.signal(s.SIGTERM, s.SIG_IGN); time.sleep(60)"),
        "fine": python("print('fine')"),
    }  # fmt: skip
    code = parts.run_parts(commands, {}, budget_s=60.0, out=tmp_path, slack_s=1.0)
    record = json.loads((tmp_path / "device-check-parts.json").read_text())
    results = record["parts"]
    assert code == 1
    assert results["crash"]["exit"] == -signal.SIGABRT and not results["crash"]["timed_out"]
    assert results["hang"]["exit"] == -signal.SIGTERM and results["hang"]["timed_out"]
    assert results["deaf"]["exit"] == -signal.SIGKILL and results["deaf"]["timed_out"]
    assert results["fine"] == {"exit": 0, "seconds": results["fine"]["seconds"], "limit_s": 1.0,
                               "timed_out": False}  # fmt: skip
    assert record["versions"]["gpu-envs"].startswith("0.") and "numba.cuda" in record["versions"]


def test_a_part_gets_twice_its_estimate_within_the_budget(tmp_path):
    commands = {"slow": python("import time; time.sleep(2)"), "next": python("pass")}
    assert parts.run_parts(commands, {"slow": 1.0, "next": 9.0}, 1.5, tmp_path, 0.5) == 1
    results = json.loads((tmp_path / "device-check-parts.json").read_text())["parts"]
    assert results["slow"]["limit_s"] == 1.5 and results["slow"]["timed_out"]  # the budget's
    assert results["next"] == {"exit": None, "skipped": "the budget is spent"}


def test_no_gpu_in_every_part_is_exit_2(tmp_path):
    commands = {part: python("raise SystemExit(2)") for part in PARTS}
    assert parts.run_parts(commands, {}, 60.0, tmp_path) == 2


def test_each_part_is_a_device_check_command_with_its_own_rows(tmp_path):
    command = parts.part_command("lean", tmp_path, ["--small"])
    assert command[1:] == ["-m", "gpu_envs.cli", "device-check", "--only", "lean", "--json",
                           str(tmp_path / "device-check-lean.json"), "--small"]  # fmt: skip
    small, full = parts.estimates(small=True), parts.estimates(small=False)
    assert list(full) == list(PARTS) and all(full[p] >= small[p] > 0 for p in PARTS)
    assert sum(2 * s + parts.SLACK_S for s in full.values()) > parts.BUDGET_S > sum(full.values())


def test_the_device_run_names_what_is_missing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    done = subprocess.run(
        ["bash", ".ci/device-run"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode != 0 and "set OUT to the folder for the rows" in done.stderr
    env |= {"OUT": str(tmp_path / "out"), "WHEELHOUSE": str(tmp_path / "none")}
    done = subprocess.run(
        ["bash", ".ci/device-run"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2 and "no wheelhouse: build it first (docs/cuda.md)" in done.stderr
