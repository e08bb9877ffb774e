"""A run folder a user can trust: one run writes it at a time, its status says how its run ended
(even a double Ctrl-C or a killed process), a resume applies what may change and refuses what cannot
before any work, a checkpoint with NaN weights is never played, ``saving.keep_last`` bounds the
checkpoints, files get the umask's mode, and no run folder is created through a planted symlink."""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from subprocess import PIPE, STDOUT, Popen

import pytest
import torch

from gpu_envs import cli
from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs import run_control
from gpu_envs.runs.checkpoint import RunFolderError
from gpu_envs.runs.config import RunConfig, apply_overrides, dump_yaml
from gpu_envs.runs.experiment import fresh_root
from gpu_envs.runs.presets import preset

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
    "saving.metrics_log_freq=1000",
    "saving.tag=example",
]


def _config(basedir: Path, *overrides: str) -> RunConfig:
    return RunConfig.from_dict(
        apply_overrides(preset("cartpole"), [*SMALL, f"saving.basedir={basedir}", *overrides])
    )


def _trained(basedir: Path, *overrides: str) -> Path:
    """The folder of a finished 2-iteration run (its checkpoint: ``ckpt/iteration_2.pth.tar``)."""
    from gpu_envs.trainers.fabric_loop import train

    return Path(train(_config(basedir, "trainer.total_timesteps=128", *overrides))["experiment"])


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _cli(*words: str, script: str = "from gpu_envs import cli; sys.exit(cli.main())") -> Popen:
    """``gpu-envs WORDS`` in a new process (``script`` runs it), its output merged, unbuffered."""
    return Popen(
        [sys.executable, "-c", f"import sys; sys.argv[0] = 'gpu-envs'\n{script}", *words],
        stdout=PIPE,
        stderr=STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


# ------------------------------------------------------------------------- 1. what a resume keeps
@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("trainer.num_envs=16", "trainer.num_envs is 8 in the checkpoint, 16 in this run"),
        ("env.max_episode_steps=50", "env is {'max_episode_steps': 500} in the checkpoint, {'"),
        ("trainer.seed=7", "trainer.seed is 1 in the checkpoint, 7 in this run"),
        ("trainer.train_batch_size=128", "trainer.train_batch_size is 64 in the checkpoint, 128"),
        ("policy.agent.model.fc_dims=[16]", "policy.agent.model.fc_dims is [8] in the checkpoint"),
    ],
)
def test_a_resume_that_changes_what_the_checkpoint_holds_is_refused_before_any_work(
    override, named, tmp_path, capsys
):
    folder = _trained(tmp_path)
    before = _files(folder)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        cli.main(["train", "--resume", str(folder), "--total-timesteps=512", override])
    message = str(stop.value.code)
    assert message.startswith("gpu-envs train: error: checkpoint ") and named in message, message
    assert "cannot change on resume" in message
    assert "Resuming from" not in capsys.readouterr().out
    assert _files(folder) == before  # not a byte changed, status and lock file included


def test_a_resume_applies_what_may_change(tmp_path):
    folder = _trained(tmp_path)
    assert (
        cli.main(
            [
                "train",
                "--resume",
                str(folder),
                "--total-timesteps=256",  # 2 more iterations
                "saving.model_params_save_freq=1",
                "evaluation.eval_freq=1",
                "evaluation.num_episodes=4",
                "policy.agent.lr=0.01",
                "policy.agent.adam_eps=1e-6",
                "policy.agent.anneal_lr=false",
            ]
        )
        == 0
    )
    saved = sorted(p.name for p in (folder / "ckpt").iterdir())
    assert saved == [
        "ckpt_best.pth.tar",
        "iteration_2.pth.tar",
        "iteration_3.pth.tar",
        "iteration_4.pth.tar",
    ]
    state = ckpt.load_checkpoint(folder / "ckpt" / "iteration_4.pth.tar")
    assert state["counters"]["evaluations"] == 2
    (group,) = state["policies"]["agent"]["optimizer"]["param_groups"]
    assert (group["lr"], group["eps"]) == (0.01, 1e-6)  # not the saved optimizer's 3e-3 and 1e-5


# ------------------------------------------------------------------------- 2. one writer per folder
def test_a_folder_lock_refuses_a_second_holder_by_pid_until_released(tmp_path):
    lock = run_control.FolderLock(tmp_path)
    assert (tmp_path / run_control.LOCK_FILE).read_text() == f"{os.getpid()}\n"
    with pytest.raises(RunFolderError, match=f"{tmp_path} is in use: process {os.getpid()} "):
        run_control.FolderLock(tmp_path)  # another open file description: as another process
    lock.release()
    lock.release()
    run_control.FolderLock(tmp_path).release()


@pytest.mark.timeout(600)
def test_a_second_train_of_a_running_folder_is_refused_at_once(tmp_path):
    folder = tmp_path / "cartpole_ppo" / "example"
    words = [*SMALL, f"saving.basedir={tmp_path}", "saving.model_params_save_freq=1"]
    first = _cli("train", "cartpole", *words, "trainer.total_timesteps=100000000")
    try:
        while not (folder / "ckpt" / "iteration_1.pth.tar").exists():
            assert first.poll() is None, first.communicate()[0]
            time.sleep(0.05)
        second = _cli("train", "--resume", str(folder))
        try:
            output = second.communicate(timeout=240)[0]
        finally:
            second.kill()
        assert second.returncode == 1, output
        assert output.strip().splitlines()[-1] == (
            f"gpu-envs train: error: {folder} is in use: process {first.pid} is writing it (it "
            "holds run.lock); one run writes a folder at a time: wait for that run to end, or "
            "stop it"
        )
        assert "Resuming from" not in output
        assert first.poll() is None  # the first run goes on
        first.send_signal(signal.SIGINT)
        output = first.communicate(timeout=240)[0]
        assert first.returncode == 130, output
    finally:
        first.kill()
    assert run_control.read_status(folder)["status"] == "interrupted"


# ------------------------------------------------------------------------- 3. a true status
_SLOW_LEARNING = """
import time
from gpu_envs import cli
from gpu_envs.trainers import ppo

learn = ppo.learn

def slow_learn(groups, rollout, iteration, num_iterations):
    print(f"[test] learning iteration {iteration}", flush=True)
    time.sleep(2.0)  # room for the Ctrl-Cs to land while the update runs
    return learn(groups, rollout, iteration, num_iterations)

ppo.learn = slow_learn
sys.exit(cli.main())
"""


@pytest.mark.timeout(600)
def test_ctrl_c_twice_marks_the_run_aborted(tmp_path):
    folder = tmp_path / "cartpole_ppo" / "example"
    proc = _cli(
        "train",
        "cartpole",
        *SMALL,
        f"saving.basedir={tmp_path}",
        "saving.model_params_save_freq=1",  # the folder holds a checkpoint: it is kept
        "trainer.total_timesteps=100000",
        script=_SLOW_LEARNING,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[test] learning iteration 2"):
                proc.send_signal(signal.SIGINT)
            elif line.startswith("[SIGINT] finishing the current iteration"):
                proc.send_signal(signal.SIGINT)
                break
        output = "".join(lines) + proc.communicate(timeout=240)[0]
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    assert "aborted without saving" in output and "Traceback" not in output
    status = run_control.read_status(folder)
    assert status["status"] == "aborted", status
    assert (status["reason"], status["iteration"]) == ("KeyboardInterrupt", 2)
    assert [p.name for p in ckpt.iteration_checkpoints(folder / "ckpt")] == ["iteration_1.pth.tar"]


def _dead_run(folder: Path) -> None:
    """What a run killed during its first checkpoint write leaves: its config, a ``running``
    status and a lock file nobody holds."""
    folder.mkdir(parents=True)
    dump_yaml(_config(folder.parent.parent), folder / "total_config.yaml")
    run_control.write_status(folder, "running", iteration=0)
    (folder / "run.lock").write_text("999999\n")


def test_a_running_status_nobody_holds_the_lock_of_is_marked_crashed(tmp_path):
    resumed, beside = tmp_path / "cartpole_ppo" / "example", tmp_path / "cartpole_ppo" / "other"
    _dead_run(resumed)
    _dead_run(beside)
    with pytest.raises(SystemExit, match="no readable iteration_<N>.pth.tar checkpoint"):
        cli.main(["train", "--resume", str(resumed)])
    status = run_control.read_status(resumed)
    assert status["status"] == "crashed" and "killed" in status["reason"], status
    assert run_control.read_status(beside)["status"] == "running"

    new = _trained(tmp_path)  # a new run of the same experiment name looks at its neighbours
    assert new.parent == beside.parent and run_control.read_status(new)["status"] == "finished"
    assert run_control.read_status(beside)["status"] == "crashed"


def test_a_running_status_stays_while_its_run_holds_the_lock(tmp_path):
    run_control.write_status(tmp_path, "running", iteration=0)
    alive = run_control.FolderLock(tmp_path)
    assert run_control.mark_if_crashed(tmp_path)["status"] == "running"
    alive.release()
    assert run_control.mark_if_crashed(tmp_path)["status"] == "crashed"


def test_an_orphaned_run_is_claimed_once_its_writer_lets_go(tmp_path):
    """``claim_if_orphaned`` (a rank that outlives rank 0): the folder's lock, when its status says
    ``running`` and no process holds the lock within ``wait_s``; nothing for a folder not here or
    a run whose status says how it ended."""
    assert run_control.claim_if_orphaned(tmp_path / "on another node", wait_s=0.0) is None
    run_control.write_status(tmp_path, "running", iteration=0)
    alive = run_control.FolderLock(tmp_path)
    assert run_control.claim_if_orphaned(tmp_path, wait_s=0.2) is None  # its writer holds it
    threading.Timer(0.2, alive.release).start()  # the writer ends while the claim waits
    lock = run_control.claim_if_orphaned(tmp_path, wait_s=30.0)
    assert lock is not None
    assert (tmp_path / run_control.LOCK_FILE).read_text() == f"{os.getpid()}\n"
    with pytest.raises(RunFolderError, match="is in use"):
        run_control.FolderLock(tmp_path)
    lock.release()
    run_control.write_status(tmp_path, "failed", reason="recorded")
    assert run_control.claim_if_orphaned(tmp_path) is None


# ------------------------------------------------------------------------- 4. NaN weights
def test_evaluate_and_render_refuse_a_checkpoint_with_nan_weights(tmp_path):
    folder = _trained(tmp_path)
    state = torch.load(folder / "ckpt" / "iteration_2.pth.tar", weights_only=True)
    state["policies"]["agent"]["model"]["critic.weight"][0, 1] = float("nan")
    poisoned = tmp_path / "poisoned.pth.tar"
    torch.save(state, poisoned)  # save_checkpoint itself would refuse
    out = tmp_path / "episode.gif"
    for words in (
        ["evaluate", "cartpole", str(poisoned), "--episodes", "2"],
        ["render", "cartpole", str(poisoned), "--out", str(out)],
    ):
        with pytest.raises(SystemExit) as stop:
            cli.main(words)
        assert f"checkpoint {poisoned}: policies.agent.model.critic.weight holds NaN or inf" in str(
            stop.value.code
        ), words
    assert not out.exists()


# ------------------------------------------------------------------------- 5. saving.keep_last
def test_keep_last_bounds_the_iteration_checkpoints(tmp_path):
    folder = _trained(
        tmp_path,
        "trainer.total_timesteps=384",  # 6 iterations
        "saving.model_params_save_freq=1",
        "saving.keep_last=2",
        "evaluation.eval_freq=1",
        "evaluation.num_episodes=4",
    )
    names = sorted(p.name for p in (folder / "ckpt").iterdir())
    assert names == ["ckpt_best.pth.tar", "iteration_5.pth.tar", "iteration_6.pth.tar"]


def test_pruning_keeps_the_newest_and_the_checkpoint_just_written(tmp_path):
    for name in ("ckpt_best", *(f"iteration_{n}" for n in range(1, 6))):
        (tmp_path / f"{name}.pth.tar").write_bytes(b"x")
    written = tmp_path / "iteration_2.pth.tar"  # a resume from an older checkpoint writes it
    assert ckpt.prune_checkpoints(tmp_path, 0, written) == []
    removed = ckpt.prune_checkpoints(tmp_path, 2, written)
    assert sorted(p.name for p in removed) == ["iteration_1.pth.tar", "iteration_3.pth.tar"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt_best.pth.tar",
        "iteration_2.pth.tar",
        "iteration_4.pth.tar",
        "iteration_5.pth.tar",
    ]


# ------------------------------------------------------------------------- 6. file modes
def test_checkpoints_and_the_status_get_the_mode_of_every_other_file(tmp_path):
    mask = os.umask(0)
    os.umask(mask)
    other = tmp_path / "notes.txt"
    other.write_text("")
    ckpt.save_checkpoint({"iteration": 1}, tmp_path / "iteration_1.pth.tar")
    run_control.write_status(tmp_path, "running")
    for path in (tmp_path / "iteration_1.pth.tar", tmp_path / run_control.STATUS_FILE, other):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path


# ------------------------------------------------------------------------- 7. planted symlinks
def test_run_folders_are_not_created_through_a_planted_symlink(tmp_path):
    elsewhere, base = tmp_path / "elsewhere", tmp_path / "experiments"
    elsewhere.mkdir()
    base.mkdir()
    (base / "cartpole_ppo").symlink_to(elsewhere)
    with pytest.raises(
        RunFolderError, match=f"{base / 'cartpole_ppo'} is a symbolic link \\(to {elsewhere}\\)"
    ):
        fresh_root(base / "cartpole_ppo" / "example")
    (base / "cartpole_ppo").unlink()
    (base / "cartpole_ppo").mkdir()
    (base / "cartpole_ppo" / "example").symlink_to(elsewhere)
    with pytest.raises(RunFolderError, match="example is a symbolic link"):
        fresh_root(base / "cartpole_ppo" / "example")
    assert not any(elsewhere.iterdir())

    scratch = tmp_path / "scratch"  # basedir itself may be a link: the user's own
    scratch.mkdir()
    (tmp_path / "runs").symlink_to(scratch)
    assert fresh_root(tmp_path / "runs" / "cartpole_ppo" / "example").name == "example"
    assert (scratch / "cartpole_ppo" / "example").is_dir()


def test_train_says_which_link_it_refuses(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "cartpole_ppo").symlink_to(elsewhere)
    with pytest.raises(SystemExit) as stop:
        cli.main(["train", "cartpole", *SMALL, f"saving.basedir={tmp_path}"])
    assert str(stop.value.code).startswith(
        f"gpu-envs train: error: {tmp_path / 'cartpole_ppo'} is a symbolic link"
    )
    assert not any(elsewhere.iterdir())
