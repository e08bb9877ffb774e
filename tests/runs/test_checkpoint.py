"""Checkpoints: atomic round trip, clear errors for corrupt or mismatched files, weights-only
loading."""

import pytest
import torch

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs.config import ModelConfig
from gpu_envs.trainers.policy import ActorCritic


def _state(module):
    opt = torch.optim.Adam(module.parameters(), lr=1e-3, eps=1e-5)
    module(torch.randn(3, 4))[1].sum().backward()
    opt.step()
    return {
        "iteration": 7,
        "env_step": 7000,
        "num_iterations": 10,
        "counters": {"total_episodes": 12, "train_seconds": 1.5, "evaluations": 3},
        "best_eval": 99.0,
        "config": {
            "name": "cartpole",
            "policy": {
                "agent": {
                    "lr": 1e-3,
                    "model": {"type": "fully_connected", "fc_dims": [8], "activation": "tanh"},
                }
            },
        },
        "spaces": {"obs_dim": 4, "action_nvec": [2]},
        "policies": {"agent": {"model": module.state_dict(), "optimizer": opt.state_dict()}},
        "sampler": {"counter": 5},
        "rng": [{"torch": torch.get_rng_state()}],
    }


def test_round_trip_is_exact_and_leaves_no_temp_file(tmp_path):
    module = ActorCritic(4, (2,), ModelConfig(fc_dims=[8]))
    state = _state(module)
    path = tmp_path / "ckpt" / "iteration_7.pth.tar"
    ckpt.save_checkpoint(state, path)
    assert [p.name for p in path.parent.iterdir()] == ["iteration_7.pth.tar"]
    loaded = ckpt.load_checkpoint(path)
    assert loaded["iteration"] == 7 and loaded["counters"] == state["counters"]
    for key, value in module.state_dict().items():
        assert torch.equal(loaded["policies"]["agent"]["model"][key], value)
    assert torch.equal(loaded["rng"][0]["torch"], state["rng"][0]["torch"])
    assert loaded["policies"]["agent"]["optimizer"]["state"][0]["step"] == 1
    ckpt.check_compatible(
        loaded, path, 4, (2,), {"agent": module}, {"agent": ModelConfig(fc_dims=[8])}
    )


def test_iteration_checkpoints_are_listed_newest_first(tmp_path):
    for n in (2, 10, 9):
        (tmp_path / f"iteration_{n}.pth.tar").write_bytes(b"x")
    (tmp_path / "ckpt_best.pth.tar").write_bytes(b"x")
    assert [p.name for p in ckpt.iteration_checkpoints(tmp_path)] == [
        "iteration_10.pth.tar",
        "iteration_9.pth.tar",
        "iteration_2.pth.tar",
    ]
    assert ckpt.iteration_checkpoints(tmp_path / "missing") == []


def test_corrupt_and_foreign_files_get_clear_errors(tmp_path):
    module = ActorCritic(4, (2,), ModelConfig(fc_dims=[8]))
    good = tmp_path / "good.pth.tar"
    ckpt.save_checkpoint(_state(module), good)
    truncated = tmp_path / "truncated.pth.tar"
    truncated.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ckpt.CheckpointError, match="corrupt"):
        ckpt.load_checkpoint(truncated)
    foreign = tmp_path / "foreign.pth.tar"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(ckpt.CheckpointError, match="not a gpu-envs trainer checkpoint"):
        ckpt.load_checkpoint(foreign)
    with pytest.raises(ckpt.CheckpointError, match="does not exist"):
        ckpt.load_checkpoint(tmp_path / "nothing.pth.tar")


def test_pickled_objects_are_refused(tmp_path):
    path = tmp_path / "evil.pth.tar"
    torch.save({"format": ckpt.FORMAT, "payload": ModelConfig()}, path)
    with pytest.raises(ckpt.CheckpointError, match="corrupt or not a torch checkpoint"):
        ckpt.load_checkpoint(path)


def test_mismatched_checkpoint_is_refused(tmp_path):
    module = ActorCritic(4, (2,), ModelConfig(fc_dims=[8]))
    path = tmp_path / "c.pth.tar"
    ckpt.save_checkpoint(_state(module), path)
    state = ckpt.load_checkpoint(path)
    wider = ModelConfig(fc_dims=[16])
    with pytest.raises(ckpt.CheckpointError, match=r"policy 'agent' has a different network"):
        ckpt.check_compatible(
            state, path, 4, (2,), {"agent": ActorCritic(4, (2,), wider)}, {"agent": wider}
        )
    with pytest.raises(ckpt.CheckpointError, match="holds policies"):
        ckpt.check_compatible(
            state, path, 4, (2,), {"runner": module}, {"runner": ModelConfig(fc_dims=[8])}
        )
    with pytest.raises(ckpt.CheckpointError, match="observations of size 4"):
        ckpt.check_compatible(
            state, path, 71, (11, 11), {"agent": module}, {"agent": ModelConfig(fc_dims=[8])}
        )


def test_model_weights_from_trainer_checkpoint_or_bare_state_dict(tmp_path):
    module = ActorCritic(4, (2,), ModelConfig(fc_dims=[8]))
    path = tmp_path / "c.pth.tar"
    ckpt.save_checkpoint(_state(module), path)
    assert ckpt.load_model_weights(path, "agent").keys() == module.state_dict().keys()
    with pytest.raises(ckpt.CheckpointError, match="has no policy 'runner'"):
        ckpt.load_model_weights(path, "runner")
    bare = tmp_path / "agent.state_dict"
    torch.save(module.state_dict(), bare)
    assert ckpt.load_model_weights(bare, "agent").keys() == module.state_dict().keys()
