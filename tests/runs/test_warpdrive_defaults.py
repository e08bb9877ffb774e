"""The Lightning notebook's run config resolves as WarpDrive resolved it: the keys it leaves out
take WarpDrive 1.6.5's defaults (``defaults: warpdrive``), while the bundled presets keep ours."""

import copy
import dataclasses
import time

import pytest
import yaml

from gpu_envs.runs.config import (
    ConfigError,
    ModelConfig,
    PolicyConfig,
    RunConfig,
    SavingConfig,
    TrainerConfig,
    apply_overrides,
    dump_yaml,
    load_yaml,
)
from gpu_envs.runs.presets import PRESETS, preset
from tests.helpers.seed_run_config import SEED_RUN_CONFIG as NOTEBOOK_RUN_CONFIG

# WarpDrive 1.6.5's warp_drive/training/run_configs/default_configs.yaml, the values only.
WARPDRIVE_DEFAULT_CONFIGS = dict(
    trainer=dict(num_gpus=1, num_envs=10, num_episodes=10000, train_batch_size=10000),
    policy=dict(
        to_train=False,
        algorithm="A2C",
        vf_loss_coeff=0.01,
        entropy_coeff=0.05,
        clip_grad_norm=True,
        max_grad_norm=0.5,
        normalize_advantage=False,
        normalize_return=False,
        clip_param=0.01,
        gamma=0.98,
        lr=0.0001,
        model=dict(type="fully_connected", fc_dims=[64, 64], model_ckpt_filepath=""),
    ),
    saving=dict(
        metrics_log_freq=100,
        model_params_save_freq=1000,
        basedir="/tmp",
        name="default",
        tag="experiment",
    ),
)
# What its trainer does where that file has no key and we have a field (the docs' table).
WARPDRIVE_BEHAVIOUR = dict(
    gae_lambda=1.0,
    anneal_lr=False,
    update_epochs=1,
    num_minibatches=1,
    adam_eps=1e-8,
    clip_vloss=False,
)
WARPDRIVE_MODEL = dict(activation="relu", ortho_init=False)
# WarpDrive keys our schema names differently, or holds as what we always do.
OUR_NAME = {"num_gpus": "devices"}
ALWAYS = {"normalize_return": False}


def _notebook(**changes) -> dict:
    data = copy.deepcopy(NOTEBOOK_RUN_CONFIG)
    data.update(changes)
    return data


def _drop(data: dict, path: str) -> dict:
    *sections, key = path.split(".")
    node = data
    for section in sections:
        node = node[section]
    del node[key]
    return data


def _section_value(section, key: str):
    return getattr(section, OUR_NAME.get(key, key))


def test_every_key_the_notebook_leaves_out_takes_warpdrives_default():
    before = int(time.time())
    config = RunConfig.from_dict(_notebook(defaults="warpdrive"))
    after = int(time.time())
    assert config.defaults == "warpdrive"
    given_trainer = NOTEBOOK_RUN_CONFIG["trainer"]
    for key, value in WARPDRIVE_DEFAULT_CONFIGS["trainer"].items():
        expected = given_trainer.get(key, value)
        assert _section_value(config.trainer, key) == expected, key
    assert before <= config.trainer.seed <= after  # WarpDrive seeds from the clock
    for tag, given in NOTEBOOK_RUN_CONFIG["policy"].items():
        policy = config.policy[tag]
        for key, value in WARPDRIVE_DEFAULT_CONFIGS["policy"].items():
            if key == "model":
                for name, default in value.items():
                    assert getattr(policy.model, name) == given["model"].get(name, default)
            elif key in ALWAYS:
                assert value == ALWAYS[key]  # the only value we accept is WarpDrive's default
            else:
                assert getattr(policy, key) == given.get(key, value), (tag, key)
        for key, value in WARPDRIVE_BEHAVIOUR.items():
            assert getattr(policy, key) == value, (tag, key)
        for key, value in WARPDRIVE_MODEL.items():
            assert getattr(policy.model, key) == value, (tag, key)
    saving = dataclasses.asdict(config.saving)
    assert {k: saving[k] for k in NOTEBOOK_RUN_CONFIG["saving"]} == NOTEBOOK_RUN_CONFIG["saving"]
    assert saving["console"] == "blocks"  # the metrics blocks WarpDrive printed


@pytest.mark.parametrize(
    "path",
    [
        "trainer.num_envs",
        "trainer.num_episodes",
        "policy.runner.to_train",
        "policy.runner.algorithm",
        "policy.runner.gamma",
        "policy.runner.lr",
        "policy.tagger.model.fc_dims",
        "saving.metrics_log_freq",
        "saving.model_params_save_freq",
        "saving.name",
        "saving.tag",
    ],
)
def test_a_key_the_notebook_gives_falls_back_to_warpdrives_default_when_removed(path):
    config = RunConfig.from_dict(_drop(_notebook(defaults="warpdrive"), path))
    section, *rest = path.split(".")
    node = config
    if section == "policy":
        node, rest = config.policy[rest[0]], rest[1:]
        defaults = WARPDRIVE_DEFAULT_CONFIGS["policy"]
    else:
        node = getattr(config, section)
        defaults = WARPDRIVE_DEFAULT_CONFIGS[section]
    for key in rest[:-1]:
        node, defaults = getattr(node, key), defaults[key]
    assert getattr(node, rest[-1]) == defaults[rest[-1]]


def test_without_the_key_the_notebooks_dict_takes_our_defaults_as_before():
    config = RunConfig.from_dict(NOTEBOOK_RUN_CONFIG)
    assert config.defaults == "gpu_envs"
    assert config.policy["runner"].vf_loss_coeff == PolicyConfig().vf_loss_coeff
    assert config.policy["runner"].anneal_lr is True and config.trainer.seed == 42


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_bundled_presets_resolve_with_our_defaults(name):
    data = preset(name)
    assert "defaults" not in data
    config = RunConfig.from_dict(data)
    assert config.defaults == "gpu_envs"
    for tag, policy in config.policy.items():
        given = data["policy"][tag]
        for spec in dataclasses.fields(PolicyConfig):
            if spec.name != "model" and spec.name not in given:
                assert getattr(policy, spec.name) == getattr(PolicyConfig(), spec.name), spec.name
        for spec in dataclasses.fields(ModelConfig):
            if spec.name not in given["model"]:
                assert getattr(policy.model, spec.name) == getattr(ModelConfig(), spec.name)
    for section, kind in (("trainer", TrainerConfig), ("saving", SavingConfig)):
        for spec in dataclasses.fields(kind):
            if spec.name not in data[section]:
                assert getattr(getattr(config, section), spec.name) == getattr(kind(), spec.name)


def test_the_defaults_override_switches_a_preset_to_warpdrives():
    config = RunConfig.from_dict(apply_overrides(preset("tag"), ["defaults=warpdrive"]))
    runner = config.policy["runner"]
    assert config.defaults == "warpdrive"
    assert (runner.vf_loss_coeff, runner.entropy_coeff, runner.anneal_lr) == (0.01, 0.05, False)
    assert runner.lr == 0.005  # what the preset gives stays


def test_a_warpdrive_config_round_trips_through_yaml(tmp_path):
    config = RunConfig.from_dict(_notebook(defaults="warpdrive"))
    dump_yaml(config, tmp_path / "run.yaml")
    assert RunConfig.from_dict(load_yaml(tmp_path / "run.yaml")) == config


def test_warpdrives_own_keys_are_read_or_refused_by_name():
    data = _notebook(defaults="warpdrive")
    data["trainer"]["num_gpus"] = 1
    data["policy"]["runner"]["normalize_return"] = False
    config = RunConfig.from_dict(data)
    assert config.trainer.devices == 1
    data["policy"]["runner"]["normalize_return"] = True
    with pytest.raises(ConfigError, match="^policy.runner.normalize_return: must be false"):
        RunConfig.from_dict(data)
    data = _notebook(defaults="warpdrive")
    data["trainer"].update(num_gpus=1, devices=1)
    with pytest.raises(ConfigError, match="^trainer.num_gpus: WarpDrive's name for"):
        RunConfig.from_dict(data)
    data = _notebook(defaults="warpdrive")
    data["policy"]["tagger"]["lr"] = [[0, 0.01], [1000, 0.001]]
    with pytest.raises(ConfigError, match=r"^policy.tagger.lr: must be a number; WarpDrive's"):
        RunConfig.from_dict(data)
    with pytest.raises(ConfigError, match="^defaults: must be 'gpu_envs' or 'warpdrive'"):
        RunConfig.from_dict(_notebook(defaults="rllib"))


def test_a_config_whose_keys_are_filled_in_cannot_switch_its_defaults():
    filled = apply_overrides(preset("tag"), [])  # every key given, under our defaults
    with pytest.raises(ConfigError, match="^defaults: the config says 'gpu_envs'"):
        apply_overrides(filled, ["defaults=warpdrive"])


def test_the_cli_trains_the_notebooks_dict_from_a_yaml_file_with_warpdrives_defaults(tmp_path):
    import argparse

    from gpu_envs.commands import train as train_cli

    path = tmp_path / "notebook.yaml"
    path.write_text(yaml.safe_dump(_notebook(defaults="warpdrive")))
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args, extra = parser.parse_known_args(["--config", str(path), "trainer.num_envs=10"])
    config = train_cli.build_config(args, extra)
    assert config.defaults == "warpdrive" and config.trainer.num_envs == 10
    assert config.policy["runner"].entropy_coeff == 0.05
    assert config.saving.name == "continuous_tag"


def test_the_tutorial_maps_every_warpdrive_key_and_every_field_set_for_it():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "tutorial-tag-lightning.md").read_text()
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ")]
    warpdrive_keys = {row[0].removeprefix("| ") for row in rows}
    our_fields = " ".join(row[2] for row in rows if len(row) > 2)
    for section, keys in WARPDRIVE_DEFAULT_CONFIGS.items():
        prefix = "policy.<p>" if section == "policy" else section
        for key, value in keys.items():
            names = [f"{key}.{inner}" for inner in value] if key == "model" else [key]
            for name in names:
                assert f"`{prefix}.{name}`" in warpdrive_keys, name
    for key in [*WARPDRIVE_BEHAVIOUR, "trainer.seed"]:
        assert f"`{key}`" in our_fields, key
    for key in WARPDRIVE_MODEL:
        assert f"`model.{key}`" in our_fields, key
