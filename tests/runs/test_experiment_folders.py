"""Experiment folders: claimed atomically (one run per folder, even at the same second), and freed
of the temporary files a killed checkpoint write leaves behind."""

import threading
from datetime import datetime

from gpu_envs.runs import experiment
from gpu_envs.runs.checkpoint import save_checkpoint
from gpu_envs.runs.config import RunConfig
from gpu_envs.runs.experiment import Experiment, fresh_root
from gpu_envs.runs.presets import preset

NOW = datetime(2026, 12, 1, 15, 30, 45)


class _FrozenClock(datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


def test_claims_in_the_same_second_get_distinct_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "datetime", _FrozenClock)
    root = tmp_path / "cartpole_ppo" / "example"
    claimed = [fresh_root(root) for _ in range(4)]
    assert [p.name for p in claimed] == [
        "example",
        "example_261201_153045",
        "example_261201_153045_1",
        "example_261201_153045_2",
    ]
    assert all(p.is_dir() and not any(p.iterdir()) for p in claimed)


def test_an_existing_empty_folder_is_not_shared(tmp_path):
    root = tmp_path / "example"
    root.mkdir()
    assert fresh_root(root) != root


def test_racing_claims_never_share_a_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "datetime", _FrozenClock)
    root = tmp_path / "runs" / "example"
    start = threading.Barrier(8)
    claimed = []

    def claim():
        start.wait()
        claimed.append(fresh_root(root))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(claimed)) == 8
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(p.name for p in claimed)


def test_starting_in_a_folder_removes_leftover_temporary_checkpoint_files(tmp_path):
    ckpt_dir = tmp_path / "run" / "ckpt"
    ckpt_dir.mkdir(parents=True)
    save_checkpoint({"iteration": 1}, ckpt_dir / "iteration_1.pth.tar")
    leftovers = [
        ckpt_dir / ".iteration_2.pth.tar.k3j9x1.tmp",
        ckpt_dir / ".ckpt_best.pth.tar.a8b2c0.tmp",
    ]
    leftovers[0].write_bytes(b"")  # what a run killed inside torch.save leaves
    leftovers[1].write_bytes(b"PK\x03\x04 half a zip")
    unrelated = ckpt_dir / "notes.tmp"
    unrelated.write_text("the user's own file")

    exp = Experiment(tmp_path / "run", RunConfig.from_dict(preset("cartpole")))
    exp.close()
    assert sorted(p.name for p in ckpt_dir.iterdir()) == ["iteration_1.pth.tar", "notes.tmp"]
    learner_log = (tmp_path / "run" / "log" / "learner" / "learner_logger.txt").read_text()
    assert all(str(p) in learner_log for p in leftovers)
