"""The Lightning notebook's flow on the CPU: env, agent map, module, callbacks, fit, close."""

import lightning.pytorch as pl
import pytest
import torch

import gpu_envs
from gpu_envs.lightning.module import EnvResetCallback, TagLightningModule
from gpu_envs.lightning.warpdrive import PerfStatsCallback
from gpu_envs.runs.config import ConfigError, RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers.game_faces import TagGame
from gpu_envs.trainers.ppo import NonFiniteError

# 2 games of 10 steps, a rollout of 5 steps per game: two iterations (epochs) make one episode.
# The tagger trains with PPO (2 epochs x 2 minibatches), the runner with the preset's A2C.
TINY = [
    "env.num_taggers=2",
    "env.num_runners=5",
    "env.grid_length=2.0",
    "env.episode_length=10",
    "env.tagging_distance=0.25",
    "env.num_other_agents_observed=3",
    "trainer.num_envs=2",
    "trainer.train_batch_size=10",
    "trainer.num_episodes=2",
    "trainer.accelerator=cpu",
    "policy.runner.model.fc_dims=[16,16]",
    "policy.tagger.model.fc_dims=[16,16]",
    "policy.tagger.algorithm=PPO",
    "policy.tagger.update_epochs=2",
    "policy.tagger.num_minibatches=2",
    "saving.metrics_log_freq=1",
    "evaluation.eval_freq=0",
]


def _run_config(basedir="/nonexistent-unwritten") -> dict:
    """The tiny config; a module that fits writes its experiment folder under ``basedir``."""
    return apply_overrides(preset("tag"), [*TINY, f"saving.basedir={basedir}"])


def _env(run_config: dict) -> gpu_envs.TagEnv:
    return gpu_envs.TagEnv(
        num_envs=run_config["trainer"]["num_envs"], device="cpu", **run_config["env"]
    )


def _quiet_trainer(max_epochs) -> pl.Trainer:
    """Lightning's ``Trainer`` on the CPU with the reset callback and nothing else around."""
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[EnvResetCallback()],
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def _params(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_two_epochs_train_both_policies_and_log_their_metrics(capsys, tmp_path):
    run_config = _run_config(tmp_path)
    env = _env(run_config)
    policy_tag_to_agent_id_map = {"tagger": list(env.taggers), "runner": list(env.runners)}
    module = TagLightningModule(
        env=env, config=run_config, policy_tag_to_agent_id_map=policy_tag_to_agent_id_map
    )
    before = {tag: _params(policy) for tag, policy in module.policies.items()}
    num_epochs = (
        run_config["trainer"]["num_episodes"]
        * run_config["env"]["episode_length"]
        / run_config["trainer"]["train_batch_size"]
    )
    assert num_epochs == module.num_iterations == 2
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[EnvResetCallback(), PerfStatsCallback()],
        max_epochs=num_epochs,
        log_every_n_steps=1,
        reload_dataloaders_every_n_epochs=1,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(module)

    assert module.iteration == 2 and module.env_step == 2 * 10
    metrics = trainer.callback_metrics
    for tag in ("tagger", "runner"):
        for name in (
            "Total loss",
            "Policy loss",
            "Value function loss",
            "Mean entropy",
            "Gradient norm",
            "Learning rate",
            "Current timestep",
        ):
            assert torch.isfinite(metrics[f"{tag}/{name}"]), (tag, name)
        assert float(metrics[f"{tag}/Current timestep"]) == 20.0
        after = _params(module.policies[tag])
        assert any(not torch.equal(before[tag][k], after[k]) for k in after), (
            f"{tag} weights did not change"
        )
    # Linear annealing over num_iterations: iteration 2 of 2 runs at half the configured rate.
    assert float(metrics["runner/Learning rate"]) == pytest.approx(0.005 / 2)
    assert float(metrics["tagger/Learning rate"]) == pytest.approx(0.002 / 2)
    assert float(metrics["perf/Mean env-steps per sec (total)"]) > 0
    # The same metrics under CleanRL's names, as the Fabric trainer logs them.
    assert float(metrics["charts/SPS"]) == float(metrics["perf/Mean env-steps per sec (total)"])
    assert float(metrics["charts/runner/learning_rate"]) == pytest.approx(0.005 / 2)
    for tag in ("tagger", "runner"):
        for name in ("value_loss", "policy_loss", "entropy", "approx_kl", "clipfrac"):
            assert torch.isfinite(metrics[f"losses/{tag}/{name}"]), (tag, name)
    out = capsys.readouterr().out
    assert (
        out.count("Metrics for policy 'tagger'") == 2
        and out.count("Metrics for policy 'runner'") == 2
    )
    assert out.count("Speed performance stats") == 2
    assert (
        "Mean env. step time per iter (ms)" in out
        and "Iteration                               :      2 / 2" in out
    )

    module.close()
    assert not env._tensors  # the env holds no buffers any more (None or an empty mapping)
    with pytest.raises(RuntimeError, match="closed"):
        module.reset_envs()


def test_a_typed_config_and_the_default_agent_map_are_accepted():
    config = RunConfig.from_dict(_run_config())
    module = TagLightningModule(env=_env(config.to_dict()), config=config)
    assert module.groups[0].agents == slice(2, 7) and module.groups[1].agents == slice(
        0, 2
    )  # runner, tagger


def test_training_without_the_reset_callback_names_it(tmp_path):
    run_config = _run_config(tmp_path)
    module = TagLightningModule(env=_env(run_config), config=run_config)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with pytest.raises(RuntimeError, match="EnvResetCallback"):
        trainer.fit(module)


@pytest.mark.parametrize(
    "agent_map, message",
    [
        ({"tagger": [0, 1]}, "policies"),
        ({"tagger": [0, 1, 2], "runner": [2, 3, 4, 5, 6]}, "both"),
        ({"tagger": [0, 1], "runner": [2, 3, 4, 5]}, "no policy"),
        ({"tagger": [0, 1], "runner": [2, 3, 4, 5, 6, 7]}, "not agent ids"),
    ],
)
def test_a_bad_agent_map_is_refused(agent_map, message):
    run_config = _run_config()
    with pytest.raises(ValueError, match=message):
        TagLightningModule(
            env=_env(run_config), config=run_config, policy_tag_to_agent_id_map=agent_map
        )


def test_env_and_config_must_agree_on_the_number_of_games():
    run_config = _run_config()
    env = gpu_envs.TagEnv(num_envs=3, device="cpu", **run_config["env"])
    with pytest.raises(ConfigError, match="num_envs"):
        TagLightningModule(env=env, config=run_config)


def test_a_frozen_policy_keeps_its_weights_while_the_other_learns_through_its_one_process_step(
    tmp_path,
):
    run_config = apply_overrides(
        _run_config(tmp_path), ["policy.runner.to_train=false", "trainer.compile=true"]
    )
    module = TagLightningModule(env=_env(run_config), config=run_config, verbose=False)
    before = {tag: _params(policy) for tag, policy in module.policies.items()}
    trainer = _quiet_trainer(2)
    trainer.fit(module)
    assert all(
        torch.equal(before["runner"][k], v) for k, v in _params(module.policies["runner"]).items()
    )
    assert any(
        not torch.equal(before["tagger"][k], v)
        for k, v in _params(module.policies["tagger"]).items()
    )
    assert torch.isnan(trainer.callback_metrics["runner/Total loss"])
    assert {group.tag: group.step and group.step.kind for group in module.groups} == {
        "tagger": "analytic",  # one process: the Fabric trainer's step (trainers/analytic_step.py)
        "runner": None,
    }
    module.close()


def test_the_env_is_seen_through_the_trainers_tag_game():
    run_config = _run_config()
    env = _env(run_config)
    module = TagLightningModule(env=env, config=run_config)
    assert type(module.game) is TagGame and module.game.env is env
    assert not env.validate_actions  # the trainer samples valid actions itself
    with pytest.raises(ValueError, match="autoreset_mode='next_step'"):
        TagLightningModule(
            env=gpu_envs.TagEnv(
                num_envs=2, device="cpu", autoreset_mode="same_step", **run_config["env"]
            ),
            config=run_config,
        )


def test_a_fractional_max_epochs_is_refused_by_name(tmp_path):
    run_config = _run_config(tmp_path)
    module = TagLightningModule(env=_env(run_config), config=run_config)
    trainer = _quiet_trainer(1.5)
    with pytest.raises(ValueError, match="max_epochs=1.5 is not a whole number"):
        trainer.fit(module)


def test_a_diverging_policy_stops_the_run_as_in_the_fabric_trainer(tmp_path):
    run_config = _run_config(tmp_path)
    module = TagLightningModule(env=_env(run_config), config=run_config, verbose=False)
    collect = module.collector.collect

    def collect_a_nan_reward():
        buffers = collect()
        buffers["runner"].rewards[0, 0, 0] = float("nan")
        return buffers

    module.collector.collect = collect_a_nan_reward
    trainer = _quiet_trainer(2)
    with pytest.raises(
        NonFiniteError,
        match="diverged at iteration 1: policy 'runner' (total_loss|grad_norm) is nan",
    ):
        trainer.fit(module)
    module.close()


@pytest.mark.parametrize("compile_step", [False, True])
def test_the_lightning_module_trains_exactly_as_the_fabric_trainer(tmp_path, compile_step):
    """One training core: the same config gives the same weights, bit for bit, under
    ``gpu-envs train``'s Fabric loop and under Lightning's ``Trainer``."""
    from gpu_envs.runs import checkpoint as ckpt
    from gpu_envs.trainers.fabric_loop import train

    overrides = [
        f"trainer.compile={str(compile_step).lower()}",
        "trainer.progress_bar=false",
        "saving.console=none",
    ]
    config = RunConfig.from_dict(
        apply_overrides(_run_config(tmp_path / "fabric"), [*TINY[-1:], *overrides])
    )
    fabric_run = train(config)

    config = RunConfig.from_dict(
        {
            **config.to_dict(),
            "saving": {**config.to_dict()["saving"], "basedir": str(tmp_path / "pl")},
        }
    )
    module = TagLightningModule(env=_env(config.to_dict()), config=config, verbose=False)
    _quiet_trainer(module.num_iterations).fit(module)
    lightning_checkpoint = ckpt.iteration_path(module.run.root / "ckpt", module.iteration)
    module.close()

    by_fabric = ckpt.load_checkpoint(fabric_run["checkpoint"])
    by_lightning = ckpt.load_checkpoint(lightning_checkpoint)
    assert by_fabric["iteration"] == by_lightning["iteration"] == 2
    for tag in ("runner", "tagger"):
        fabric_weights = by_fabric["policies"][tag]["model"]
        lightning_weights = by_lightning["policies"][tag]["model"]
        for name, tensor in fabric_weights.items():
            assert torch.equal(tensor, lightning_weights[name]), f"{tag}.{name}"
