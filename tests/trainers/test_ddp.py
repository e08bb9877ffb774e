"""Two DDP processes on the CPU (gloo): identical weights after updates (compiled losses), different
env seeds, episode counts summed over the ranks; a run interrupted by Ctrl-C and resumed with
``gpu-envs train --resume RUN`` ends with the uninterrupted run's weights, bit for bit; a checkpoint
resumes on as many processes as wrote it, and its RNG states are checked before they are restored.

The tests run this file as a script; Fabric's launcher starts the second rank by running it again.
"""

import csv
import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs import run_control
from gpu_envs.runs.checkpoint import load_checkpoint
from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset

OVERRIDES = [
    "env.max_episode_steps=5",  # every env's episodes end at steps 4 and 10 of its 16
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=128",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
    "trainer.strategy=ddp",
    "trainer.seed=7",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=1",
    "saving.metrics_log_freq=1",
    "trainer.compile=true",
    "saving.tag=example",  # a fixed folder name (the presets' is the start time)
]


def test_two_ranks_hold_identical_weights_with_different_env_seeds(tmp_path):
    done = subprocess.run(
        [sys.executable, __file__, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert ranks[0]["iterations"] == ranks[1]["iterations"] == 2
    assert ranks[0]["compiled"] and ranks[1]["compiled"]  # trainer.compile under DDP
    for key, value in ranks[0]["weights"].items():
        assert torch.equal(value, ranks[1]["weights"][key]), key
    assert not torch.equal(ranks[0]["initial"], ranks[0]["weights"]["actor.weight"])  # it trained
    assert not torch.equal(ranks[0]["obs"], ranks[1]["obs"])
    assert ranks[0]["first_obs"].shape == (4, 4)
    assert not torch.equal(ranks[0]["first_obs"], ranks[1]["first_obs"])
    # rank r's envs were seeded with seed + r * num_envs + i:
    # rank 1's env 0 starts like env 4 of seed 7
    from gpu_envs.games.cartpole import CartPoleVectorEnv

    reference, _ = CartPoleVectorEnv(8).reset(seed=7)
    torch.testing.assert_close(ranks[0]["first_obs"], reference[:4])
    torch.testing.assert_close(ranks[1]["first_obs"], reference[4:])
    experiments = list((tmp_path / "exp" / "cartpole_ppo").iterdir())
    assert [p.name for p in experiments] == ["example"]  # only rank 0 wrote
    # Each rank ended 4 envs x 2 episodes; the counters and logs hold both ranks' episodes.
    assert ranks[0]["episodes"] == ranks[1]["episodes"] == 8
    root = experiments[0]
    state = load_checkpoint(root / "ckpt" / "iteration_2.pth.tar")
    assert state["counters"]["total_episodes"] == 16 and state["env_step"] == 2 * 2 * 32
    collector_log = (root / "log" / "collector" / "collector_logger.txt").read_text()
    assert "total_episode_count: 8\n" in collector_log  # after iteration 1
    assert "total_episode_count: 16\n" in collector_log  # after iteration 2
    with open(root / "log" / "csv" / "version_0" / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    lengths = [row["charts/episodic_length"] for row in rows if row["charts/episodic_length"]]
    assert [float(length) for length in lengths] == [5.0, 5.0]


#: A 2-process run of 6 iterations (2 ranks x 4 envs x 8 steps each), episodes ending inside the
#: rollouts, evaluations at iterations 2, 4 and 6; the interrupted copy stops after iteration 3.
RESUMED = [
    "env.max_episode_steps=5",
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=384",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
    "trainer.strategy=ddp",
    "trainer.seed=3",
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=2",
    "evaluation.num_episodes=4",
    "saving.tag=run",
]
STOP_AT, ITERATIONS = 3, 6


def _resumed_config(basedir: Path, *overrides: str) -> RunConfig:
    return RunConfig.from_dict(
        apply_overrides(preset("cartpole"), [*RESUMED, f"saving.basedir={basedir}", *overrides])
    )


def _own_storage(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is the whole of its storage (not a slice of a bigger tensor)."""
    nbytes = tensor.numel() * tensor.element_size()
    return tensor.storage_offset() == 0 and tensor.untyped_storage().nbytes() == nbytes


def _tensors(tree, name=""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _tensors(value, f"{name}.{key}")
    else:
        yield name, tree


@pytest.mark.timeout(300)
def test_a_two_process_run_interrupted_and_resumed_ends_with_the_uninterrupted_weights(tmp_path):
    done = subprocess.run(
        [sys.executable, __file__, str(tmp_path), "interrupted"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    whole = tmp_path / "whole" / "cartpole_ppo" / "run"
    parts = tmp_path / "parts" / "cartpole_ppo" / "run"
    assert run_control.read_status(whole)["status"] == "finished"
    assert run_control.read_status(parts)["status"] == "interrupted"
    stopped = parts / "ckpt" / f"iteration_{STOP_AT}.pth.tar"
    assert [p.name for p in ckpt.iteration_checkpoints(parts / "ckpt")] == [stopped.name]
    saved = load_checkpoint(stopped)
    assert len(saved["rng"]) == 2
    for rank, entry in enumerate(saved["rng"]):  # each rank's state is its own, not a slice
        for name, tensor in _tensors(entry):
            assert _own_storage(tensor), f"rng[{rank}]{name} is a view into a bigger tensor"

    # Another number of processes is refused before anything starts, naming both counts.
    before = sorted(p.relative_to(parts) for p in parts.rglob("*"))
    with pytest.raises(
        ckpt.CheckpointError,
        match=re.escape(
            f"checkpoint {stopped} was written by a run on 2 process(es) (its trainer.devices 2 x "
            "trainer.num_nodes 1), this run has 1"
        ),
    ):
        from gpu_envs.trainers.fabric_loop import train

        train(
            _resumed_config(tmp_path / "parts", "trainer.devices=1", "trainer.strategy=auto"),
            resume=str(parts),
        )
    assert sorted(p.relative_to(parts) for p in parts.rglob("*")) == before
    assert run_control.read_status(parts)["status"] == "interrupted"

    # The command the interrupted run printed, in a fresh process: the run's own config launches
    # both ranks again.
    resumed = subprocess.run(
        [sys.executable, "-m", "gpu_envs.cli", "train", "--resume", str(parts)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"Resuming from {stopped} at iteration {STOP_AT}" in resumed.stdout
    assert run_control.read_status(parts)["status"] == "finished"
    a = load_checkpoint(whole / "ckpt" / f"iteration_{ITERATIONS}.pth.tar")
    b = load_checkpoint(parts / "ckpt" / f"iteration_{ITERATIONS}.pth.tar")
    assert a["policies"]["agent"]["model"].keys() == b["policies"]["agent"]["model"].keys()
    for key, tensor in a["policies"]["agent"]["model"].items():
        assert torch.equal(tensor, b["policies"]["agent"]["model"][key]), key
    assert (a["env_step"], a["counters"]["total_episodes"]) == (
        b["env_step"],
        b["counters"]["total_episodes"],
    )
    for rank in (0, 1):  # every rank's generator and envs continued where they stopped
        for name, tensor in _tensors(a["rng"][rank]):
            assert torch.equal(tensor, dict(_tensors(b["rng"][rank]))[name]), f"rng[{rank}]{name}"


@pytest.mark.parametrize(
    ("saved", "found"),
    [
        (lambda s: s.to(torch.int64), r"a \({n},\) torch.int64 tensor"),
        (lambda s: s[:100].clone(), r"a \(100,\) torch.uint8 tensor"),
        (lambda s: s.reshape(2, -1).clone(), r"a \(2, {half}\) torch.uint8 tensor"),
        (lambda s: [1, 2], "list"),
    ],
)
def test_a_wrong_rng_state_is_refused_by_name(saved, found):
    state = torch.get_rng_state()
    found = found.format(n=state.numel(), half=state.numel() // 2)
    checkpoint = {"rng": [{"torch": state.clone()}, {"torch": saved(state)}]}
    with pytest.raises(ckpt.CheckpointError, match=rf"'rng\[1\]\.torch' is {found}, expected"):
        ckpt.rank_states(checkpoint, "c.pth.tar", 2, {"torch": state})


def test_rank_states_are_one_per_process_and_copied():
    state = torch.get_rng_state()
    # as checkpoints of 2-process runs were written: each rank's state a slice of the gathered one
    gathered = torch.stack([state, torch.flip(state, (0,))])
    buffer = io.BytesIO()
    torch.save({"rng": [{"torch": gathered[0]}, {"torch": gathered[1]}]}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)
    assert checkpoint["rng"][1]["torch"].storage_offset() == state.numel()
    # a generator the checkpoint holds no state of (``cuda`` of a CPU run) is left as it is
    copies = ckpt.rank_states(checkpoint, "c.pth.tar", 2, {"torch": state, "cuda": state})
    assert "cuda" not in copies[1]
    for rank in (0, 1):
        assert _own_storage(copies[rank]["torch"])
        assert torch.equal(copies[rank]["torch"], gathered[rank])
    torch.set_rng_state(copies[0]["torch"])  # the slice itself crashed torch (segfault)
    with pytest.raises(ckpt.CheckpointError, match=r"has no field 'rng\[0\]\.torch'"):
        ckpt.rank_states({"rng": [{}]}, "c.pth.tar", 1, {"torch": state})
    with pytest.raises(
        ckpt.CheckpointError, match=re.escape("c.pth.tar was written by a run on 1 process(es)")
    ):
        ckpt.rank_states({"rng": [{"torch": state}]}, "c.pth.tar", 2, {"torch": state})
    with pytest.raises(ckpt.CheckpointError, match="'rng' is not a list of per-process states"):
        ckpt.rank_states({"rng": {}}, "c.pth.tar", 1, {"torch": state})


RANK_SCRIPT = """
import os, sys, torch
from pathlib import Path
from tests.trainers.test_ddp import _resumed_config, _threads_in_epoll
from gpu_envs.trainers.fabric_loop import train

out = Path(sys.argv[1])
summary = train(_resumed_config(out, "trainer.total_timesteps=64", "evaluation.eval_freq=0"))
found = [summary["status"], torch.distributed.is_initialized(), _threads_in_epoll()]
(out / f"rank{os.environ['RANK']}.txt").write_text(repr(found))
"""


def _threads_in_epoll() -> int:
    """This process's threads waiting in ``epoll_wait`` (gloo's transport loops), per Linux."""
    tasks = Path("/proc/self/task")
    return sum("epoll" in (task / "wchan").read_text() for task in tasks.iterdir())


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads Linux's /proc")
def test_a_ddp_run_leaves_no_process_group_for_the_exit(tmp_path):
    """Gloo's threads left to the interpreter's exit can free a collective's tensors after Python
    is gone and abort a run that ended well (SIGABRT): ``train`` returns with the process group
    destroyed and its threads joined, on each of two real processes (torchrun, gloo)."""
    from tests.helpers.ports import free_port  # (not at the top: this file also runs as a script)

    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
        "127.0.0.1", "--master_port", str(free_port()), str(script), str(tmp_path),
    ]  # fmt: skip
    root = Path(__file__).parents[2]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.txt").read_text() == "['finished', False, 0]"


def _interrupted(out: Path) -> None:
    """On each rank: the whole run (``RESUMED``) in ``out/whole``, then the same run in
    ``out/parts`` stopped by a SIGINT on every rank (a Ctrl-C) while iteration ``STOP_AT``
    learns."""
    from gpu_envs.trainers import ppo
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric

    fabric = make_fabric(_resumed_config(out / "whole"))
    whole = Trainer(fabric, _resumed_config(out / "whole")).fit()
    assert (whole["status"], whole["iterations"]) == ("finished", ITERATIONS), whole
    learn = ppo.learn

    def interrupted_learn(groups, rollout, iteration, num_iterations):
        if iteration == STOP_AT:
            signal.raise_signal(signal.SIGINT)
        return learn(groups, rollout, iteration, num_iterations)

    ppo.learn = interrupted_learn
    parts = Trainer(fabric, _resumed_config(out / "parts")).fit()
    assert (parts["status"], parts["reason"], parts["iterations"]) == (
        "interrupted",
        "SIGINT",
        STOP_AT,
    ), parts


def _main(out: Path) -> None:
    from gpu_envs.runs.config import RunConfig, apply_overrides
    from gpu_envs.runs.presets import preset
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric

    config = RunConfig.from_dict(
        apply_overrides(preset("cartpole"), OVERRIDES + [f"saving.basedir={out / 'exp'}"])
    )
    fabric = make_fabric(config)
    trainer = Trainer(fabric, config)
    initial = trainer.groups[0].module.actor.weight.detach().clone()
    first_obs = trainer.game.reset(
        config.trainer.seed + fabric.global_rank * config.trainer.num_envs
    )[:, 0]
    summary = trainer.fit()
    torch.save(
        {
            "iterations": summary["iterations"],
            "weights": trainer.groups[0].module.state_dict(),
            "initial": initial,
            "first_obs": first_obs,
            "compiled": trainer.groups[0].step.kind == "compiled loss",
            "episodes": int(trainer.episodes),
            "obs": trainer.collector.buffers["agent"].obs.clone(),
        },
        out / f"rank{fabric.global_rank}.pt",
    )


if __name__ == "__main__":
    from gpu_envs.trainers.fabric_loop import leave_process_group

    if sys.argv[2:] == ["interrupted"]:
        _interrupted(Path(sys.argv[1]))
    else:
        _main(Path(sys.argv[1]))
    leave_process_group()
