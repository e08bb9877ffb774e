"""Quiet by default: a cheap ``--help``; no wall-clock asserts or hypothesis deadlines in tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

TESTS = Path(__file__).parent
HEAVY = ("torch", "numba", "lightning")


@pytest.mark.parametrize("argv", [["--help"], ["bench", "--help"]])
def test_help_imports_no_torch_and_no_numba(argv):
    code = (
        "import sys\nfrom gpu_envs.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip() == "[]"
    assert "train" in out.stdout and "bench" in out.stdout


def test_train_help_still_lists_the_trainer_flags():
    out = subprocess.run(
        [sys.executable, "-m", "gpu_envs.cli", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--total-timesteps" in out.stdout and "PRESET" in out.stdout


def test_no_test_asserts_on_wall_clock_time():
    clock = re.compile(r"\b(perf_counter|time\.time|monotonic)\(")
    offenders = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(TESTS.glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.lstrip().startswith("assert") and clock.search(line)
    ]
    assert not offenders, "speed-dependent asserts:\n" + "\n".join(offenders)


def test_hypothesis_has_no_deadline_by_default():
    assert settings.default.deadline is None
