"""The typed run config: the seed config verbatim, YAML round trip, overrides, errors naming the field."""

import argparse

import pytest

from gpu_envs.trainers import cli_args
from gpu_envs.trainers.config import ConfigError, RunConfig, apply_overrides, dump_yaml, load_yaml
from gpu_envs.trainers.presets import PRESETS, preset

SEED_RUN_CONFIG = dict(
    name="tag_continuous",
    env=dict(
        num_taggers=5,
        num_runners=100,
        grid_length=20.0,
        episode_length=200,
        max_acceleration=0.1,
        min_acceleration=-0.1,
        max_turn=2.35,
        min_turn=-2.35,
        num_acceleration_levels=10,
        num_turn_levels=10,
        skill_level_tagger=1.0,
        skill_level_runner=1.0,
        use_full_observation=False,
        runner_exits_game_after_tagged=True,
        num_other_agents_observed=10,
        tag_reward_for_tagger=10.0,
        tag_penalty_for_runner=-10.0,
        end_of_game_reward_for_runner=1.0,
        tagging_distance=0.02,
    ),
    trainer=dict(num_envs=50, train_batch_size=10000, num_episodes=500),
    policy=dict(
        runner=dict(
            to_train=True,
            algorithm="A2C",
            gamma=0.98,
            lr=0.005,
            model=dict(type="fully_connected", fc_dims=[256, 256], model_ckpt_filepath=""),
        ),
        tagger=dict(
            to_train=True,
            algorithm="A2C",
            gamma=0.98,
            lr=0.002,
            model=dict(type="fully_connected", fc_dims=[256, 256], model_ckpt_filepath=""),
        ),
    ),
    saving=dict(
        metrics_log_freq=10,
        model_params_save_freq=5000,
        basedir="/tmp",
        name="continuous_tag",
        tag="example",
    ),
)


def test_seed_run_config_is_accepted_verbatim():
    config = RunConfig.from_dict(SEED_RUN_CONFIG)
    assert config.game == "tag"
    assert config.trainer.num_steps == 200
    assert config.policy["runner"].algorithm == "A2C" and config.policy["runner"].lr == 0.005
    assert config.policy["tagger"].model.fc_dims == [256, 256]
    assert config.policy["tagger"].clip_param == 0.2  # PPO fields get defaults
    assert config.env["num_other_agents_observed"] == 10


def test_tag_preset_is_the_seed_config():
    data = preset("tag")
    assert {k: data[k] for k in SEED_RUN_CONFIG} == SEED_RUN_CONFIG


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_round_trip_through_yaml(name, tmp_path):
    config = RunConfig.from_dict(preset(name))
    dump_yaml(config, tmp_path / "c.yaml")
    again = RunConfig.from_dict(load_yaml(tmp_path / "c.yaml"))
    assert again == config
    assert again.to_dict() == config.to_dict()


def test_overrides_set_nested_fields():
    data = apply_overrides(
        preset("tag"),
        [
            "trainer.num_envs=64",
            "policy.runner.lr=0.001",
            "policy.tagger.model.fc_dims=[32, 32]",
            "env.num_runners=7",
            "evaluation.stop_value=null",
            "trainer.train_batch_size=6400",
        ],
    )
    config = RunConfig.from_dict(data)
    assert config.trainer.num_envs == 64 and config.policy["runner"].lr == 0.001
    assert config.policy["tagger"].model.fc_dims == [32, 32] and config.env["num_runners"] == 7
    assert preset("tag")["trainer"]["num_envs"] == 50  # the preset itself is untouched


@pytest.mark.parametrize(
    "override, field",
    [
        ("policy.runner.lr=-1", "policy.runner.lr"),
        ("policy.runner.gamma=1.5", "policy.runner.gamma"),
        ("policy.runner.algorithm=DQN", "policy.runner.algorithm"),
        ("policy.tagger.model.type=conv", "policy.tagger.model.type"),
        ("policy.tagger.model.fc_dims=[0]", "policy.tagger.model.fc_dims"),
        ("trainer.num_envs=abc", "trainer.num_envs"),
        ("trainer.num_envs=0", "trainer.num_envs"),
        ("trainer.train_batch_size=10001", "trainer.train_batch_size"),
        ("trainer.to_train=true", "trainer.to_train"),
        ("saving.metrics_log_freq=0", "saving.metrics_log_freq"),
        ("policy.runner.to_train=maybe", "policy.runner.to_train"),
        ("evaluation.score_policy=nobody", "evaluation.score_policy"),
        ("trainer.devices=zero", "trainer.devices"),
        ("policy.runner.lr=.inf", "policy.runner.lr"),
        ("policy.runner.lr=.nan", "policy.runner.lr"),
        ("policy.runner.lr=nan", "policy.runner.lr"),
        ("policy.runner.lr=fast", "policy.runner.lr"),
        ("evaluation.stop_value=-.inf", "evaluation.stop_value"),
    ],
)
def test_bad_values_are_rejected_naming_the_field(override, field):
    with pytest.raises(ConfigError, match=f"^{field.replace('.', '[.]')}"):
        RunConfig.from_dict(apply_overrides(preset("tag"), [override]))


def test_override_into_unknown_section_is_rejected():
    with pytest.raises(ConfigError, match="policy.nobody"):
        apply_overrides(preset("tag"), ["policy.nobody.lr=0.1"])
    with pytest.raises(ConfigError, match="expected dotted.path=value"):
        apply_overrides(preset("tag"), ["trainer.num_envs"])


def test_unknown_game_and_missing_name():
    with pytest.raises(ConfigError, match="^name"):
        RunConfig.from_dict({**preset("cartpole"), "name": "pong"})
    data = preset("cartpole")
    del data["name"]
    with pytest.raises(ConfigError, match="^name: is required"):
        RunConfig.from_dict(data)


def _args(argv):
    parser = argparse.ArgumentParser()
    cli_args.add_arguments(parser)
    return parser.parse_known_args(argv)


def test_cli_flags_and_overrides(tmp_path):
    args, extra = _args(
        [
            "cartpole",
            "trainer.seed=5",
            "--num-envs",
            "8",
            "--num-steps",
            "4",
            "--total-timesteps",
            "1000",
            "policy.agent.lr=0.01",
            "--devices",
            "2",
        ]
    )
    config = cli_args.build_config(args, extra)
    assert config.trainer.num_envs == 8 and config.trainer.train_batch_size == 32
    assert config.trainer.total_timesteps == 1000 and config.trainer.devices == 2
    assert config.trainer.seed == 5 and config.policy["agent"].lr == 0.01
    dump_yaml(config, tmp_path / "run.yaml")
    args, extra = _args(
        [
            "--config",
            str(tmp_path / "run.yaml"),
            "trainer.num_envs=16",
            "trainer.train_batch_size=64",
        ]
    )
    assert cli_args.build_config(args, extra).trainer.num_envs == 16
    args, extra = _args(["--env-id", "CartPole-v1"])
    assert cli_args.build_config(args, extra).game == "cartpole"
    args, extra = _args(["tag", "--env-id", "CartPole-v1"])
    with pytest.raises(ConfigError, match="does not match"):
        cli_args.build_config(args, extra)
    args, extra = _args(["cartpole", "--bogus-flag"])
    with pytest.raises(ConfigError, match="--bogus-flag"):
        cli_args.build_config(args, extra)


def test_resume_flag_before_the_preset():
    args, extra = _args(["--resume", "cartpole", "trainer.seed=3"])
    config = cli_args.build_config(args, extra)
    assert args.resume is True and config.game == "cartpole" and config.trainer.seed == 3
    args, extra = _args(["cartpole", "--resume", "some/dir/ckpt/iteration_3.pth.tar"])
    cli_args.build_config(args, extra)
    assert args.resume == "some/dir/ckpt/iteration_3.pth.tar"


def test_numbers_written_without_a_dot_are_floats(tmp_path):
    # YAML 1.1 (PyYAML) reads 1e-3 as the string "1e-3": float fields accept it, from overrides and files.
    config = RunConfig.from_dict(
        apply_overrides(preset("tag"), ["policy.runner.lr=1e-3", "policy.tagger.gamma=1"])
    )
    assert config.policy["runner"].lr == 0.001 and isinstance(config.policy["runner"].lr, float)
    assert config.policy["tagger"].gamma == 1.0 and isinstance(config.policy["tagger"].gamma, float)
    path = tmp_path / "run.yaml"
    path.write_text("name: cartpole\npolicy:\n  agent:\n    lr: 1e-3\n    adam_eps: 1E-8\n")
    args, extra = _args(["--config", str(path)])
    agent = cli_args.build_config(args, extra).policy["agent"]
    assert (agent.lr, agent.adam_eps) == (0.001, 1e-8)


@pytest.mark.parametrize(
    "text, shown", [("lr: fast", "the string 'fast'"), ("lr: .inf", "inf"), ("lr: .nan", "nan")]
)
def test_bad_numbers_in_a_file_name_the_key(tmp_path, text, shown):
    path = tmp_path / "run.yaml"
    path.write_text(f"name: cartpole\npolicy:\n  agent:\n    {text}\n")
    args, extra = _args(["--config", str(path)])
    with pytest.raises(
        ConfigError, match=f"^policy[.]agent[.]lr: must be a (finite )?number, got {shown}"
    ):
        cli_args.build_config(args, extra)
