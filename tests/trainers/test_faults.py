"""Faults: interrupted or killed checkpoint writes, damaged and mismatched checkpoints, diverging
runs.

No crash, no hang, no silent garbage: each fault either leaves a loadable previous checkpoint or
stops the run with an error that names the file, the field or the quantity.
"""

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from gpu_envs.commands import train as train_cli
from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs import run_control
from gpu_envs.runs.config import ModelConfig, RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers.policy import ActorCritic

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "trainer.compile=false",
    "evaluation.eval_freq=0",
    "saving.metrics_log_freq=1000",
    "saving.tag=example",  # a fixed folder name (the presets' is the start time)
]


def _state(module: ActorCritic, model: ModelConfig) -> dict:
    return {
        "iteration": 3,
        "env_step": 192,
        "num_iterations": 10,
        "counters": {"total_episodes": 4, "train_seconds": 0.5, "evaluations": 0},
        "best_eval": -1.0,
        "config": {"name": "cartpole", "policy": {"agent": {"model": vars(model).copy()}}},
        "spaces": {"obs_dim": 4, "action_nvec": [2]},
        "policies": {"agent": {"model": module.state_dict(), "optimizer": None}},
        "sampler": {},
        "rng": [{"torch": torch.get_rng_state()}],
    }


def _saved(tmp_path, name="iteration_3.pth.tar", model=None):
    model = model or ModelConfig(fc_dims=[8])
    module = ActorCritic(4, (2,), model)
    path = tmp_path / name
    ckpt.save_checkpoint(_state(module, model), path)
    return path, module


def _config(tmp_path, *overrides):
    return RunConfig.from_dict(
        apply_overrides(preset("cartpole"), [*SMALL, f"saving.basedir={tmp_path}", *overrides])
    )


def _ckpt_dir(tmp_path):
    return tmp_path / "cartpole_ppo" / "example" / "ckpt"


# ---------------------------------------------------------------------------------- writing
def test_a_save_interrupted_mid_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path, module = _saved(tmp_path)
    before = path.read_bytes()
    real_save = torch.save

    def half_then_fail(obj, file):
        real_save(obj, file)
        file.seek(0)
        file.truncate(file.tell() // 2 or 1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", half_then_fail)
    changed = _state(ActorCritic(4, (2,), ModelConfig(fc_dims=[8])), ModelConfig(fc_dims=[8]))
    for target in (path, tmp_path / "iteration_4.pth.tar"):  # over the previous file, and beside it
        with pytest.raises(OSError, match="No space left"):
            ckpt.save_checkpoint(changed, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "iteration_3.pth.tar"
    ]  # no temporary file left
    assert path.read_bytes() == before
    loaded = ckpt.load_checkpoint(path)
    for key, value in module.state_dict().items():
        assert torch.equal(loaded["policies"]["agent"]["model"][key], value)


@pytest.mark.parametrize("poison", [float("nan"), float("inf"), -float("inf")])
def test_save_refuses_non_finite_weights(tmp_path, poison):
    path, _ = _saved(tmp_path)
    before = path.read_bytes()
    module = ActorCritic(4, (2,), ModelConfig(fc_dims=[8]))
    with torch.no_grad():
        module.critic.weight[0, 3] = poison
    with pytest.raises(
        ckpt.CheckpointError,
        match=r"refusing to write .*policies\.agent\.model\.critic\.weight "
        r"holds NaN or inf",
    ):
        ckpt.save_checkpoint(_state(module, ModelConfig(fc_dims=[8])), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["iteration_3.pth.tar"]


# ---------------------------------------------------------------------------------- reading
@pytest.mark.parametrize(
    "field",
    [
        "counters.train_seconds",
        "spaces.obs_dim",
        "rng",
        "policies.agent.optimizer",
        "config.policy.agent.model.activation",
    ],
)
def test_a_missing_field_is_named(tmp_path, field):
    state = _state(ActorCritic(4, (2,), ModelConfig(fc_dims=[8])), ModelConfig(fc_dims=[8]))
    *parents, last = field.split(".")
    node = state
    for key in parents:
        node = node[key]
    del node[last]
    ckpt.save_checkpoint(state, tmp_path / "c.pth.tar")
    with pytest.raises(ckpt.CheckpointError, match=f"has no field '{re.escape(field)}'"):
        ckpt.load_checkpoint(tmp_path / "c.pth.tar")


def test_foreign_pickles_are_refused_without_torch_s_weights_only_advice(tmp_path):
    path = tmp_path / "evil.pth.tar"
    torch.save({"format": ckpt.FORMAT, "payload": ModelConfig()}, path)
    for load in (ckpt.load_checkpoint, lambda p: ckpt.load_model_weights(p, "agent")):
        with pytest.raises(ckpt.CheckpointError) as error:
            load(path)
        message = str(error.value)
        assert "corrupt or not a torch checkpoint written by gpu-envs" in message
        assert "gpu_envs.runs.config.ModelConfig" in message
        assert "weights_only" not in message and "trust" not in message


def test_empty_and_truncated_files_say_corrupt(tmp_path):
    path, _ = _saved(tmp_path)
    for size in (0, 300):
        damaged = tmp_path / f"damaged_{size}.pth.tar"
        damaged.write_bytes(path.read_bytes()[:size])
        with pytest.raises(
            ckpt.CheckpointError, match=f"{damaged.name} is corrupt or not a torch checkpoint"
        ):
            ckpt.load_checkpoint(damaged)


# ---------------------------------------------------------------------------------- resuming
def test_the_whole_network_description_is_checked(tmp_path):
    path, module = _saved(tmp_path, model=ModelConfig(fc_dims=[8], activation="tanh"))
    state = ckpt.load_checkpoint(path)
    relu = ModelConfig(fc_dims=[8], activation="relu")  # the same parameter shapes
    with pytest.raises(
        ckpt.CheckpointError,
        match="policy.agent.model.activation is 'tanh' in the checkpoint, 'relu' in this run",
    ):
        ckpt.check_compatible(
            state, path, 4, (2,), {"agent": ActorCritic(4, (2,), relu)}, {"agent": relu}
        )
    with pytest.raises(
        ckpt.CheckpointError,
        match="observations of size 4 and actions \\[2\\], this run has 4 and \\[3\\]",
    ):
        ckpt.check_compatible(
            state, path, 4, (3,), {"agent": module}, {"agent": ModelConfig(fc_dims=[8])}
        )
    # A config that agrees with weights that do not: still refused, by the parameter shapes.
    wider = ActorCritic(4, (2,), ModelConfig(fc_dims=[16]))
    with pytest.raises(ckpt.CheckpointError, match="mismatched parameters"):
        ckpt.check_compatible(
            state, path, 4, (2,), {"agent": wider}, {"agent": ModelConfig(fc_dims=[8])}
        )


def test_resuming_a_tanh_run_with_relu_names_the_field(tmp_path):
    from gpu_envs.trainers.fabric_loop import train

    train(_config(tmp_path, "trainer.total_timesteps=64"))
    with pytest.raises(
        ckpt.CheckpointError, match="policy.agent.model.activation is 'tanh' in the checkpoint"
    ):
        train(
            _config(tmp_path, "trainer.total_timesteps=128", "policy.agent.model.activation=relu"),
            resume=True,
        )


def test_resume_skips_a_damaged_newest_checkpoint(tmp_path, capsys):
    from gpu_envs.trainers.fabric_loop import train

    train(_config(tmp_path, "trainer.total_timesteps=256", "saving.model_params_save_freq=1"))
    newest = _ckpt_dir(tmp_path) / "iteration_4.pth.tar"
    newest.write_bytes(newest.read_bytes()[:1000])
    capsys.readouterr()
    with pytest.warns(
        UserWarning, match=f"skipping {re.escape(str(newest))}: checkpoint .* is corrupt"
    ):
        summary = train(
            _config(tmp_path, "trainer.total_timesteps=384", "saving.model_params_save_freq=1"),
            resume=True,
        )
    assert "at iteration 3 (env step 192)" in capsys.readouterr().out
    assert summary["iterations"] == 6
    assert ckpt.load_checkpoint(newest)["iteration"] == 4  # written again by the resumed run
    for path in ckpt.iteration_checkpoints(_ckpt_dir(tmp_path)):
        path.write_bytes(b"")
    with (
        pytest.warns(UserWarning),
        pytest.raises(ckpt.CheckpointError, match="no readable iteration_<N>"),
    ):
        train(_config(tmp_path, "trainer.total_timesteps=448"), resume=True)


def _popen(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "gpu_envs.commands.train", "cartpole", *SMALL, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _newest_iteration(ckpt_dir) -> int:
    newest = next(iter(ckpt.iteration_checkpoints(ckpt_dir)), None)
    return -1 if newest is None else int(newest.name.split("_")[1].split(".")[0])


@pytest.mark.timeout(600)  # a hang guard, not a speed bound
def test_sigkill_at_random_moments_then_resume_continues(tmp_path):
    """Three kills at random moments (saving every iteration, so some land inside a write)."""
    args = [
        f"saving.basedir={tmp_path}",
        "trainer.total_timesteps=9600",
        "saving.model_params_save_freq=1",
    ]
    ckpt_dir, rng = _ckpt_dir(tmp_path), random.Random(20261201)
    last = 0
    for kill in range(4):
        proc = _popen(*args, *(["--resume"] if kill else []))
        if kill == 3:
            output = proc.communicate()[0]
            assert proc.returncode == 0, output
        else:
            while _newest_iteration(ckpt_dir) <= last:  # running, and past its first new checkpoint
                assert proc.poll() is None, proc.communicate()[0]
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.3))
            os.kill(proc.pid, signal.SIGKILL)
            output = proc.communicate()[0]
        if kill:
            resumed_at = int(re.search(r"Resuming from \S+ at iteration (\d+)", output).group(1))
            assert resumed_at == last  # from the newest checkpoint, complete whenever the kill came
        last = _newest_iteration(ckpt_dir)
        assert ckpt.load_checkpoint(ckpt.iteration_path(ckpt_dir, last))["iteration"] == last
    final = ckpt.load_checkpoint(ckpt.iteration_path(ckpt_dir, 150))
    assert final["env_step"] == 9600
    assert not list(ckpt_dir.glob("*.tmp"))  # the resumes removed what the kills left
    assert [p.name for p in (tmp_path / "cartpole_ppo").iterdir()] == ["example"]


# ---------------------------------------------------------------------------------- diverging
def _args(tmp_path, *overrides):
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    return parser.parse_known_args(["cartpole", *SMALL, f"saving.basedir={tmp_path}", *overrides])


def _only_finite_checkpoints(ckpt_dir) -> list[str]:
    names = []
    for path in sorted(ckpt_dir.iterdir()):
        state = ckpt.load_checkpoint(path)
        assert all(torch.isfinite(t).all() for t in state["policies"]["agent"]["model"].values()), (
            path
        )
        names.append(path.name)
    return names


def test_an_injected_nan_stops_the_run_and_keeps_the_finite_checkpoints(tmp_path, monkeypatch):
    from gpu_envs.trainers import ppo

    real_update, calls = ppo.update, []

    def update_with_a_nan_reward(group, buf):
        calls.append(1)
        if len(calls) == 5:  # the env hands back one NaN reward in iteration 5
            buf.rewards[0, 0] = float("nan")
        return real_update(group, buf)

    monkeypatch.setattr(ppo, "update", update_with_a_nan_reward)
    with pytest.raises(SystemExit) as stop:
        train_cli.run(
            *_args(tmp_path, "trainer.total_timesteps=640", "saving.model_params_save_freq=2")
        )
    message = str(stop.value.code)
    assert re.search(
        r"training diverged at iteration 5: policy 'agent' (total_loss|grad_norm) is nan", message
    )
    assert "Lower policy.agent.lr (now 0.003)" in message and "rewards" in message
    assert len(calls) == 5
    assert _only_finite_checkpoints(_ckpt_dir(tmp_path)) == [
        "iteration_2.pth.tar",
        "iteration_4.pth.tar",
    ]
    status = run_control.read_status(_ckpt_dir(tmp_path).parent)  # not left "running"
    assert status["status"] == "failed", status
    assert status["reason"].startswith("NonFiniteError: training diverged at iteration 5")


def test_a_huge_learning_rate_exits_with_an_error(tmp_path):
    proc = _popen(
        f"saving.basedir={tmp_path}",
        "trainer.total_timesteps=640",
        "policy.agent.lr=1e30",
        "saving.model_params_save_freq=1",
    )
    output = proc.communicate()[0]  # pytest-timeout guards a hang
    assert proc.returncode != 0
    assert (
        "gpu-envs train: error: training diverged at iteration" in output
        and "Traceback" not in output
    )
    assert "Lower policy.agent.lr (now 1e+30)" in output
    _only_finite_checkpoints(_ckpt_dir(tmp_path))
