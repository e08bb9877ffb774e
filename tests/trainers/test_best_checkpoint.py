"""The best checkpoint (``ckpt/ckpt_best.pth.tar``): a resume from an older checkpoint replaces it
only with a better score than the one it records on disk, and the evaluator's log names the file
that holds the evaluated weights, never a file that was not written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers.fabric_loop import train

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=1",
    "evaluation.num_episodes=2",
    "saving.metrics_log_freq=1000",
    "saving.model_params_save_freq=2",  # iteration_2 and iteration_4: evaluations 1 and 3 have none
    "saving.tag=best",
]


def _config(basedir: Path, iterations: int) -> RunConfig:
    overrides = [*SMALL, f"saving.basedir={basedir}", f"trainer.total_timesteps={64 * iterations}"]
    return RunConfig.from_dict(apply_overrides(preset("cartpole"), overrides))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, Path]:
    """(basedir, run folder) of a 4-iteration CartPole run evaluated at every iteration."""
    basedir = tmp_path_factory.mktemp("best")
    folder = Path(train(_config(basedir, 4))["experiment"])
    return basedir, folder


def _tables(folder: Path) -> dict[int, str]:
    """Each evaluation's ``ckpt_name`` in the evaluator's log, by iteration."""
    lines = (folder / "log" / "evaluator" / "evaluator_logger.txt").read_text().splitlines()
    names = {}
    for index, line in enumerate(lines):
        found = re.search(r"evaluation at iteration (\d+)", line)
        if found:
            header, row = _cells(lines[index + 1]), _cells(lines[index + 3])
            names[int(found.group(1))] = dict(zip(header, row))["ckpt_name"]
    return names


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_the_evaluator_log_names_only_checkpoints_that_were_written(run):
    _, folder = run
    names = _tables(folder)
    assert sorted(names) == [1, 2, 3, 4]
    for iteration, name in names.items():
        assert not name.startswith("iteration_"), (
            iteration,
            name,
        )  # saved after the log, if at all
        assert name in ("ckpt_best.pth.tar", "none (not a new best)"), (iteration, name)
    assert names[1] == "ckpt_best.pth.tar"  # the first evaluation is always the best so far
    assert (folder / "ckpt" / "ckpt_best.pth.tar").is_file()


def test_a_resume_from_an_older_checkpoint_keeps_a_better_best_on_disk(run):
    basedir, folder = run
    best = folder / "ckpt" / "ckpt_best.pth.tar"
    state = torch.load(best, weights_only=True)
    older = ckpt.iteration_path(folder / "ckpt", 2)
    # the run improved after iteration 2: a resume from there replays better evaluations
    assert state["best_eval"] > ckpt.load_checkpoint(older)["best_eval"]
    state["best_eval"] = 499.0  # a better score than this tiny run's next evaluations reach
    torch.save(state, best)
    before = best.read_bytes()
    assert ckpt.load_checkpoint(older)["best_eval"] < 499.0
    summary = train(_config(basedir, 5), resume=str(older))
    assert summary["iterations"] == 5
    assert best.read_bytes() == before  # never replaced by a worse evaluation
    assert summary["best_eval"] == 499.0
    # Where the run's best (on disk and in the checkpoint) is below every evaluation's score,
    # the resumed run's first evaluation replaces it.
    newer = ckpt.iteration_path(folder / "ckpt", 4)
    for path in (best, newer):
        state = torch.load(path, weights_only=True)
        state["best_eval"] = -1000.0
        torch.save(state, path)
    train(_config(basedir, 6), resume=str(newer))
    assert ckpt.load_checkpoint(best)["best_eval"] > -1000.0
    assert ckpt.load_checkpoint(best)["iteration"] == 5


def test_an_unreadable_best_checkpoint_is_named_and_counts_as_none(tmp_path):
    best = tmp_path / "ckpt_best.pth.tar"
    assert ckpt.recorded_best(best) == float("-inf")  # none yet
    best.write_bytes(b"not a checkpoint")
    with pytest.warns(UserWarning, match=f"{re.escape(str(best))}: it cannot be read"):
        assert ckpt.recorded_best(best) == float("-inf")
    torch.save({"best_eval": float("nan")}, best)
    with pytest.warns(UserWarning, match="it records the score nan"):
        assert ckpt.recorded_best(best) == float("-inf")
