"""The typed run config: the seed config verbatim, YAML round trip, overrides, errors naming
the field."""

import argparse
import ast
import dataclasses
import inspect
import math
import string
import textwrap

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.commands import train as train_cli
from gpu_envs.runs.config import (
    ConfigError,
    EvaluationConfig,
    ModelConfig,
    PolicyConfig,
    RunConfig,
    SavingConfig,
    TrainerConfig,
    apply_overrides,
    dump_yaml,
    load_yaml,
    set_fields,
)
from gpu_envs.runs.presets import PRESETS, preset
from tests.helpers.seed_run_config import SEED_RUN_CONFIG


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
    assert {k: data[k] for k in SEED_RUN_CONFIG if k != "saving"} == {
        k: v for k, v in SEED_RUN_CONFIG.items() if k != "saving"
    }
    # its folder: ./experiments/tag_a2c/<start time>, not the notebook's /tmp/continuous_tag/example
    saving = RunConfig.from_dict(data).saving
    assert (saving.basedir, saving.name, saving.tag) == ("experiments", "tag_a2c", None)
    assert saving.metrics_log_freq == SEED_RUN_CONFIG["saving"]["metrics_log_freq"]


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
        ("trainer.reward_shaping=-1", "trainer.reward_shaping"),
        ("trainer.reward_shaping=30", "trainer.reward_shaping"),  # Tag has no potential
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
    train_cli.add_arguments(parser)
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
    config = train_cli.build_config(args, extra)
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
    assert train_cli.build_config(args, extra).trainer.num_envs == 16
    args, extra = _args(["--env-id", "CartPole-v1"])
    assert train_cli.build_config(args, extra).game == "cartpole"
    args, extra = _args(["tag", "--env-id", "CartPole-v1"])
    with pytest.raises(ConfigError, match="does not match"):
        train_cli.build_config(args, extra)
    args, extra = _args(["cartpole", "--bogus-flag"])
    with pytest.raises(ConfigError, match="--bogus-flag"):
        train_cli.build_config(args, extra)


def test_flags_set_typed_fields_without_a_text_round_trip(monkeypatch):
    from gpu_envs.runs import config as config_module

    seen = []
    real = config_module.OmegaConf.update
    monkeypatch.setattr(
        config_module.OmegaConf,
        "update",
        lambda cfg, key, value, **kw: seen.append((key, value)) or real(cfg, key, value, **kw),
    )
    args, extra = _args(["cartpole", "--num-envs", "8", "--lr", str(1 / 3), "--no-cuda-graphs"])
    config = train_cli.build_config(args, extra)
    values = dict(seen)
    assert values["trainer.num_envs"] == 8 and type(values["trainer.num_envs"]) is int
    assert values["policy.agent.lr"] == 1 / 3 and values["trainer.cuda_graphs"] is False
    assert (
        config.trainer.train_batch_size
        == 8 * RunConfig.from_dict(preset("cartpole")).trainer.num_steps
    )
    with pytest.raises(ConfigError, match=r"^trainer\.num_envs: must be an int"):
        set_fields(preset("cartpole"), {"trainer.num_envs": 1.5})


def test_resume_flag_before_the_preset():
    args, extra = _args(["--resume", "cartpole", "trainer.seed=3"])
    config = train_cli.build_config(args, extra)
    assert args.resume is True and config.game == "cartpole" and config.trainer.seed == 3
    args, extra = _args(["cartpole", "--resume", "some/dir/ckpt/iteration_3.pth.tar"])
    train_cli.build_config(args, extra)
    assert args.resume == "some/dir/ckpt/iteration_3.pth.tar"


def test_numbers_written_without_a_dot_are_floats(tmp_path):
    # YAML 1.1 (PyYAML) reads 1e-3 as the string "1e-3": float fields accept it, from overrides
    # and files.
    config = RunConfig.from_dict(
        apply_overrides(preset("tag"), ["policy.runner.lr=1e-3", "policy.tagger.gamma=1"])
    )
    assert config.policy["runner"].lr == 0.001 and isinstance(config.policy["runner"].lr, float)
    assert config.policy["tagger"].gamma == 1.0 and isinstance(config.policy["tagger"].gamma, float)
    path = tmp_path / "run.yaml"
    path.write_text("name: cartpole\npolicy:\n  agent:\n    lr: 1e-3\n    adam_eps: 1E-8\n")
    args, extra = _args(["--config", str(path)])
    agent = train_cli.build_config(args, extra).policy["agent"]
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
        train_cli.build_config(args, extra)


# ----------------------------------------------------------------- the schema and its errors
def test_defaults_meet_every_rule_and_every_field_has_a_docstring():
    config = RunConfig.from_dict({"name": "cartpole", "policy": {"agent": {}}})
    assert config.trainer == TrainerConfig() and config.policy["agent"] == PolicyConfig()
    sections = (RunConfig, ModelConfig, PolicyConfig, TrainerConfig, SavingConfig, EvaluationConfig)
    for section in sections:
        body = ast.parse(textwrap.dedent(inspect.getsource(section))).body[0].body
        documented = {
            field.target.id
            for field, after in zip(body, body[1:])
            if isinstance(field, ast.AnnAssign)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
        }
        assert documented == {spec.name for spec in dataclasses.fields(section)}, section


def test_a_dotted_override_of_a_nested_policy_field_round_trips_through_yaml(tmp_path):
    data = apply_overrides(
        preset("tag"), ["policy.tagger.model.activation=relu", "policy.runner.clip_vloss=true"]
    )
    config = RunConfig.from_dict(data)
    assert config.policy["tagger"].model.activation == "relu"
    assert config.policy["runner"].clip_vloss and not config.policy["tagger"].clip_vloss
    assert config.policy["runner"].model.activation == "tanh"  # the other policy keeps its own
    dump_yaml(config, tmp_path / "run.yaml")
    args, extra = _args(["--config", str(tmp_path / "run.yaml")])
    assert train_cli.build_config(args, extra) == config


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "policy:\n  agent:\n    model:\n      widths: [3]\n",
            "policy.agent.model.widths: unknown field; allowed: type, fc_dims,",
        ),
        ("saving:\n  folder: x\n", "saving.folder: unknown field; allowed: metrics_log_freq,"),
        ("trainer:\n  num_envs: many\n", "trainer.num_envs: must be an int, got the string 'many'"),
        ("trainer:\n  num_envs: 2.5\n", "trainer.num_envs: must be an int, got 2.5"),
        ("trainer:\n  compile: sometimes\n", "trainer.compile: must be true or false, got the"),
        ("trainer:\n  total_timesteps: [1]\n", "trainer.total_timesteps: must be an int or null"),
        (
            "policy:\n  agent:\n    model:\n      fc_dims: [64, wide]\n",
            "policy.agent.model.fc_dims[1]: must be an int, got the string 'wide'",
        ),
        ("policy:\n  agent:\n    model: 3\n", "policy.agent.model: must be a mapping, got 3"),
        ("policy:\n  agent:\n", "policy.agent: must be a mapping, got None"),
        ("trainer: 64\n", "trainer: must be a mapping, got 64"),
        ("evaluation:\n  stop_value: high\n", "evaluation.stop_value: must be a number or null"),
    ],
)
def test_unknown_keys_and_wrong_types_in_a_file_name_the_path(tmp_path, text, message):
    path = tmp_path / "run.yaml"
    path.write_text("name: cartpole\n" + text)
    args, extra = _args(["--config", str(path)])
    with pytest.raises(ConfigError) as error:
        train_cli.build_config(args, extra)
    assert str(error.value).startswith(message)


def test_overrides_name_the_path_of_unknown_keys_and_unparsable_values():
    with pytest.raises(ConfigError, match="^trainer[.]num_env: unknown field; allowed: num_envs"):
        apply_overrides(preset("cartpole"), ["trainer.num_env=8"])
    with pytest.raises(ConfigError, match="^policy[.]agent[.]model[.]fc_dims: cannot parse"):
        apply_overrides(preset("cartpole"), ["policy.agent.model.fc_dims=[8"])
    with pytest.raises(ConfigError, match="^policy[.]agnt: no such policy.*the policies are agent"):
        apply_overrides(preset("cartpole"), ["policy.agnt.lr=0.1"])
    with pytest.raises(ConfigError, match="^config: must be a mapping, got list"):
        RunConfig.from_dict([("name", "cartpole")])


def test_flags_are_checked_like_overrides():
    args, extra = _args(["cartpole", "--num-envs", "0"])
    with pytest.raises(ConfigError, match="^trainer[.]num_envs: must be >= 1, got 0"):
        train_cli.build_config(args, extra)
    args, extra = _args(["cartpole", "--devices", "auto", "--strategy", "ddp"])
    trainer = train_cli.build_config(args, extra).trainer
    assert (trainer.devices, trainer.strategy) == ("auto", "ddp")


def test_print_config_prints_the_resolved_config_and_exits(capsys):
    args, extra = _args(["cartpole", "--print-config", "policy.agent.lr=1e-3", "--num-steps", "4"])
    with pytest.raises(SystemExit) as stop:
        train_cli.train_from(args, extra)
    assert stop.value.code == 0
    printed = RunConfig.from_dict(yaml.safe_load(capsys.readouterr().out))
    assert printed.policy["agent"].lr == 0.001 and printed.trainer.train_batch_size == 4 * 64


def _with(data: dict, path: str, value) -> dict:
    *sections, name = path.split(".")
    node = data
    for section in sections:
        node = node.setdefault(section, {})
    node[name] = value
    return data


_NOT_NUMBERS = st.one_of(
    st.text(alphabet=string.ascii_letters, min_size=1),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from("ab"), st.integers(), max_size=1),
)
_BAD_VALUES = {
    "policy.agent.lr": st.one_of(st.floats(max_value=0.0), st.just(math.inf), _NOT_NUMBERS),
    "policy.agent.gamma": st.one_of(
        st.floats(min_value=1.0, exclude_min=True), st.floats(max_value=0.0, exclude_max=True)
    ),
    "policy.agent.entropy_coeff": st.one_of(st.floats(max_value=-1e-300), st.just(math.nan)),
    "policy.agent.update_epochs": st.one_of(
        st.integers(max_value=0), st.floats(allow_nan=False), _NOT_NUMBERS
    ),
    "trainer.num_envs": st.one_of(st.integers(max_value=0), _NOT_NUMBERS),
    "trainer.seed": st.one_of(st.integers(max_value=-1), st.floats(allow_nan=False)),
    "evaluation.stop_value": st.one_of(st.sampled_from([math.inf, -math.inf]), _NOT_NUMBERS),
}


@settings(max_examples=150, deadline=None)
@given(data=st.data(), path=st.sampled_from(sorted(_BAD_VALUES)))
def test_random_bad_numbers_raise_config_error_naming_the_field(data, path):
    value = data.draw(_BAD_VALUES[path], label=path)
    with pytest.raises(ConfigError) as error:
        RunConfig.from_dict(_with(preset("cartpole"), path, value))
    assert str(error.value).startswith(f"{path}: must be "), str(error.value)


def test_the_config_reference_page_is_generated_from_the_schema():
    from pathlib import Path

    from gpu_envs.runs import config_docs

    page = Path(__file__).resolve().parents[2] / "docs" / "config.md"
    assert page.read_text(encoding="utf8") == config_docs.fields_table(), (
        "docs/config.md is stale: python -m gpu_envs.runs.config_docs > docs/config.md"
    )
    assert "| `saving.checkpoint_minutes` | a number | `10.0` | must be >= 0 |" in page.read_text()


def test_cli_flags_set_fields_and_num_envs_keeps_the_steps_per_env():
    from gpu_envs.commands.train import add_arguments, build_config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["cartpole", "--num-envs", "100", "--lr", "0.001", "--device", "cpu"])
    config = build_config(args)
    steps = RunConfig.from_dict(preset("cartpole")).trainer.num_steps
    assert (config.trainer.num_envs, config.trainer.num_steps) == (100, steps)
    assert config.trainer.train_batch_size == 100 * steps
    assert config.policy["agent"].lr == 0.001 and config.trainer.accelerator == "cpu"
    args = parser.parse_args(["cartpole", "--num-envs", "10", "--num-steps", "3"])
    assert build_config(args).trainer.train_batch_size == 30


def test_resolver_interpolations_are_off_unless_the_user_opts_in(monkeypatch):
    data = apply_overrides(preset("cartpole"), [])
    data["saving"]["name"] = "run_${oc.env:HOME}"
    with pytest.raises(ConfigError, match=r"^saving\.name: resolver interpolations .*RESOLVERS=1"):
        RunConfig.from_dict(data)
    data["saving"]["name"] = "run_${trainer.seed}"  # a reference to another field stays allowed
    assert RunConfig.from_dict(data).saving.name == f"run_{data['trainer']['seed']}"
    monkeypatch.setenv("GPU_ENVS_CONFIG_RESOLVERS", "1")
    monkeypatch.setenv("RUN_SUFFIX", "x")
    data["saving"]["name"] = "run_${oc.env:RUN_SUFFIX}"
    assert RunConfig.from_dict(data).saving.name == "run_x"


@pytest.mark.parametrize("weight", [1e30, 1001, -1.0])
def test_reward_shaping_is_bounded(weight):
    with pytest.raises(ConfigError, match=r"^trainer\.reward_shaping: must be in \[0, 1000\]"):
        RunConfig.from_dict(
            apply_overrides(preset("mountaincar"), [f"trainer.reward_shaping={weight}"])
        )


def test_the_warpdrive_mode_writes_under_the_working_directory():
    config = RunConfig.from_dict({"name": "tag", "defaults": "warpdrive", "policy": {"runner": {}}})
    assert config.saving.basedir == "experiments"
