"""The "compiling ... (first run only)" line: said when numba's disk cache lacks a game's kernels,
once per process and game, at INFO (silent for library users); the CLI shows it on stderr."""

import logging
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from gpu_envs.engine import first_compile

JITTED = "import numba\n@numba.njit(cache=True)\ndef add_one(x):\n    return x + 1\n"


@pytest.fixture
def jitted(tmp_path, monkeypatch):
    """A cached njit function of a fresh module (so a fresh, cold cache entry)."""
    (tmp_path / "jitted_module.py").write_text(JITTED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import jitted_module

    yield jitted_module.add_one
    sys.modules.pop("jitted_module", None)


def test_the_cache_is_cold_until_the_function_first_compiles(jitted):
    assert first_compile.cache_is_cold(jitted)
    jitted(1)
    assert not first_compile.cache_is_cold(jitted)
    assert not first_compile.cache_is_cold(lambda: None)  # no disk cache: nothing to announce


def test_announce_logs_once_per_game_and_only_on_a_cold_cache(jitted, caplog, monkeypatch):
    monkeypatch.setattr(first_compile, "_checked", set())
    driver = SimpleNamespace(reset_loop=jitted)
    with caplog.at_level(logging.INFO, logger="gpu_envs.compile"):
        first_compile.announce("my_game", "cpu", driver)
        first_compile.announce("my_game", "cpu", driver)
    assert [r.getMessage() for r in caplog.records] == [
        "compiling the CPU kernels of my_game (first run only: numba caches them on disk) ..."
    ]
    caplog.clear()
    jitted(1)  # compiled and cached: another game of these kernels says nothing
    with caplog.at_level(logging.INFO, logger="gpu_envs.compile"):
        first_compile.announce("other_game", "cpu", driver)
    assert caplog.records == []


def run_python(code: str, cache) -> subprocess.CompletedProcess:
    env_vars = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env_vars
    )


def test_a_library_user_sees_nothing_and_the_cli_shows_the_line_once(tmp_path):
    """In fresh processes on a cold cache: a gymnasium user's env prints nothing; the same env
    under the CLI's console set-up prints the line once on stderr, and nothing on a warm cache."""
    make = (
        "import gymnasium as gym, gpu_envs\n"
        "for _ in range(2):\n"
        "    env = gym.make_vec('gpu_envs/Pendulum-v1', num_envs=2, device='cpu')\n"
        "    env.reset(seed=0)\n"
    )
    quiet = run_python(make, tmp_path / "cache_a")
    assert quiet.stdout + quiet.stderr == ""
    cli_console = "from gpu_envs.engine.first_compile import show_on_stderr\nshow_on_stderr()\n"
    cold = run_python(cli_console + make, tmp_path / "cache_b")
    assert cold.stdout == "" and cold.stderr == (
        "compiling the CPU kernels of pendulum (first run only: numba caches them on disk) ...\n"
    )
    warm = run_python(cli_console + make, tmp_path / "cache_b")
    assert warm.stdout + warm.stderr == ""
