"""Values at the edges of the run config: boolean fields take booleans only (issue 44, item 12),
seeds take every int the engine's env seeds take (item 4)."""

import dataclasses
import subprocess
import sys
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.engine.validation import MAX_SEED
from gpu_envs.runs.config import (
    BOOL_SPELLINGS,
    ConfigError,
    RunConfig,
    apply_overrides,
    set_fields,
)
from gpu_envs.runs.presets import preset


def _bool_fields(cls: type, path: str) -> list[str]:
    """The dotted path of every boolean field of dataclass ``cls`` and its sections (a policy
    section as ``policy.agent``, the cartpole preset's)."""
    found = []
    for name, hint in typing.get_type_hints(cls).items():
        if typing.get_origin(hint) is dict and dataclasses.is_dataclass(typing.get_args(hint)[1]):
            found += _bool_fields(typing.get_args(hint)[1], f"{path}{name}.agent.")
        elif dataclasses.is_dataclass(hint):
            found += _bool_fields(hint, f"{path}{name}.")
        elif hint is bool:
            found.append(f"{path}{name}")
    return found


BOOL_FIELDS = _bool_fields(RunConfig, "")


def _nested(path: str, value) -> dict:
    """``{"a": {"b": value}}`` for the path ``a.b``."""
    for part in reversed(path.split(".")):
        value = {part: value}
    return value


def _with(path: str, value) -> dict:
    """The cartpole preset with the field at ``path`` set to ``value``, as plain data (a YAML
    file's)."""
    data = preset("cartpole")
    section = data
    *parents, last = path.split(".")
    for part in parents:
        section = section.setdefault(part, {})
    section[last] = value
    return data


def _read(config: RunConfig, path: str):
    value = config
    for part in path.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


def test_every_boolean_field_is_found():
    assert {"trainer.progress_bar", "trainer.compile", "policy.agent.model.ortho_init"} <= set(
        BOOL_FIELDS
    )


NOT_BOOLEANS = st.one_of(
    st.integers().filter(lambda value: value not in (0, 1)),
    st.floats(),
    st.text().filter(lambda text: text.lower() not in BOOL_SPELLINGS and "${" not in text),
    st.integers().filter(lambda value: value not in (0, 1)).map(str),
)


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(BOOL_FIELDS), value=NOT_BOOLEANS)
def test_boolean_fields_refuse_other_values_naming_the_field(field, value):
    """A YAML file's value, a ``KEY=VALUE`` override and a command-line flag's value alike."""
    pattern = f"^{field.replace('.', '[.]')}: must be true or false"
    with pytest.raises(ConfigError, match=pattern):
        RunConfig.from_dict(_with(field, value))
    with pytest.raises(ConfigError, match=pattern):
        set_fields(preset("cartpole"), {field: value})
    if isinstance(value, int):
        with pytest.raises(ConfigError, match=pattern):
            apply_overrides(preset("cartpole"), [f"{field}={value}"])


@pytest.mark.parametrize("spelling", [True, False, 0, 1, *BOOL_SPELLINGS, "TRUE", "No"])
@pytest.mark.parametrize("field", BOOL_FIELDS)
def test_boolean_fields_take_the_yaml_spellings(field, spelling):
    expected = spelling if isinstance(spelling, bool) else BOOL_SPELLINGS[str(spelling).lower()]
    assert _read(RunConfig.from_dict(_with(field, spelling)), field) is expected
    override = apply_overrides(preset("cartpole"), [f"{field}={spelling}"])
    assert _read(RunConfig.from_dict(override), field) is expected


def test_a_negative_progress_bar_is_refused_by_the_command():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_envs.cli",
            "train",
            "cartpole",
            "trainer.progress_bar=-58761",
            "--print-config",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "trainer.progress_bar: must be true or false" in result.stderr


SEEDS = st.one_of(st.integers(0, 2**33), st.integers(0, MAX_SEED), st.integers(MAX_SEED - 10**4))


@settings(max_examples=60, deadline=None)
@given(
    seed=SEEDS,
    num_envs=st.integers(1, 2000),
    devices=st.integers(1, 4),
    field=st.sampled_from(["trainer.seed", "evaluation.seed"]),
)
def test_seeds_are_taken_while_every_derived_seed_fits_the_engine(seed, num_envs, devices, field):
    """Env ``i`` of rank ``r`` gets ``trainer.seed + r * n + i``, evaluation episode ``i``
    ``evaluation.seed + i``: a seed is taken exactly when the largest of them fits the engine's
    int64 seeds, and refused naming the field otherwise."""
    data = apply_overrides(
        preset("cartpole"),
        [
            f"trainer.num_envs={num_envs}",
            f"trainer.train_batch_size={num_envs}",
            f"trainer.devices={devices}",
            f"evaluation.num_episodes={num_envs}",
            f"{field}={seed}",
        ],
    )
    largest = seed + (devices if field == "trainer.seed" else 1) * num_envs - 1
    if largest <= MAX_SEED:
        assert _read(RunConfig.from_dict(data), field) == seed
    else:
        with pytest.raises(ConfigError, match=f"^{field.replace('.', '[.]')}: .*2[*][*]63 - 1"):
            RunConfig.from_dict(data)


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**64])
@pytest.mark.parametrize("field", ["trainer.seed", "evaluation.seed"])
def test_seeds_outside_the_engines_range_are_refused(field, seed):
    with pytest.raises(ConfigError, match=f"^{field.replace('.', '[.]')}: must be in"):
        RunConfig.from_dict(apply_overrides(preset("cartpole"), [f"{field}={seed}"]))


def test_a_seed_past_2_to_the_32_is_taken():
    config = RunConfig.from_dict(apply_overrides(preset("cartpole"), ["trainer.seed=4294967296"]))
    assert config.trainer.seed == 2**32
