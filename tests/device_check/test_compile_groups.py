"""The kernel compile before the parity checks runs one process per game, never two processes
that add signatures of one game's cached kernels at once: numba's cache index is read, extended
and written back without a lock, and two such processes can point an index entry at the other
signature's code (issue 46)."""

import json
import subprocess
import threading
import time
from types import SimpleNamespace

from gpu_envs.cli import build_parser
from gpu_envs.device_check import compile as compile_part
from gpu_envs.device_check import plan
from gpu_envs.device_check.compile import warm_caches


def test_each_game_compiles_in_one_process_its_checks_in_turn(monkeypatch):
    args = build_parser().parse_args(["device-check", "--full"])
    specs = plan.parity_specs(args)
    processes: list[list[str]] = []
    running: dict[str, int] = {}
    overlap: list[str] = []
    lock = threading.Lock()

    def fake_run(command, **kwargs):
        group = json.loads(command[-1])
        assert isinstance(group, list), "one process compiles a list of checks"
        games = {spec["game"] for spec in group}
        with lock:
            processes.append([spec["game"] for spec in group])
            for game in games:
                running[game] = running.get(game, 0) + 1
                if running[game] > 1:
                    overlap.append(game)
        time.sleep(0.01)
        with lock:
            for game in games:
                running[game] -= 1
        return SimpleNamespace(returncode=0, stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    (row,) = warm_caches(specs, "cuda", workers=4)
    assert not overlap
    assert all(len(set(games)) == 1 for games in processes)
    assert sorted(games[0] for games in processes) == sorted({s.game for s in specs})
    (cartpole,) = [games for games in processes if games[0] == "cartpole"]
    assert len(cartpole) == 4  # float64 and float32, both autoreset modes, in turn
    assert row.record["configs"] == len(specs) and row.record["failed"] == []


def test_a_process_names_each_check_it_could_not_compile(capsys, monkeypatch):
    def compile_spec(spec, device):
        if spec.kwargs["dtype"] == "float16":
            raise ValueError("no float16\nsecond line")

    monkeypatch.setattr(compile_part, "compile_spec", compile_spec)
    good = {"game": "cartpole", "num_envs": 4, "steps": 1, "kwargs": {"dtype": "float32"}}
    bad = {**good, "kwargs": {"dtype": "float16"}}
    specs = [dict(spec, setting=spec["kwargs"]["dtype"]) for spec in (bad, good)]
    assert compile_part.main(["cpu", json.dumps(specs)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{compile_part.FAILED}cartpole (float16): ValueError: no float16"]
