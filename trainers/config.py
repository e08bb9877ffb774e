"""The typed run configuration: dataclasses that accept the seed run config verbatim.

Shape (the original GPU framework's run config, plus PPO and evaluation fields with defaults)::

    name: cartpole | pendulum | tag | tag_continuous  # the game
    env: {...}                                  # keyword arguments of the game's env
    trainer: {num_envs, train_batch_size, num_episodes, total_timesteps, seed, accelerator, ...}
    policy:
      <tag>: {to_train, algorithm, gamma, lr, ..., model: {type, fc_dims, model_ckpt_filepath}}
    saving: {metrics_log_freq, model_params_save_freq, basedir, name, tag}
    evaluation: {eval_freq, num_episodes, stop_value, score_policy}

``RunConfig.from_dict`` checks every value and raises ``ConfigError`` naming the field
(``policy.runner.lr: must be > 0, got -1``). Float fields accept numeric strings (YAML 1.1, which
PyYAML follows, reads ``1e-3`` as a string) and refuse NaN and infinities. ``apply_overrides``
applies ``a.b.c=value`` strings (values parsed as YAML) to a plain dict before it is checked.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml


class ConfigError(ValueError):
    """A run config value or key is invalid; the message names the field."""


def _fail(path: str, message: str) -> typing.NoReturn:
    raise ConfigError(f"{path}: {message}")


def _check_range(path: str, name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        _fail(f"{path}.{name}", f"must be in [{low}, {high}], got {value!r}")


@dataclass
class ModelConfig:
    """The policy network: an MLP torso shared by the actor heads and the critic head."""

    type: str = "fully_connected"
    fc_dims: list[int] = field(default_factory=lambda: [64, 64])
    model_ckpt_filepath: str = ""
    activation: str = "tanh"
    ortho_init: bool = True

    def validate(self, path: str) -> None:
        if self.type != "fully_connected":
            _fail(f"{path}.type", f"only 'fully_connected' is supported, got {self.type!r}")
        if not self.fc_dims or any(d <= 0 for d in self.fc_dims):
            _fail(f"{path}.fc_dims", f"must be a non-empty list of ints > 0, got {self.fc_dims!r}")
        if self.activation not in ("tanh", "relu"):
            _fail(f"{path}.activation", f"must be 'tanh' or 'relu', got {self.activation!r}")
        if self.model_ckpt_filepath and not Path(self.model_ckpt_filepath).is_file():
            _fail(f"{path}.model_ckpt_filepath", f"no such file {self.model_ckpt_filepath!r}")


@dataclass
class PolicyConfig:
    """One policy: its algorithm, optimiser and loss coefficients (names as in the original)."""

    to_train: bool = True
    algorithm: str = "PPO"
    gamma: float = 0.99
    lr: float = 3e-4
    gae_lambda: float = 0.95
    vf_loss_coeff: float = 0.5
    entropy_coeff: float = 0.01
    clip_param: float = 0.2
    clip_vloss: bool = False
    normalize_advantage: bool = True
    clip_grad_norm: bool = True
    max_grad_norm: float = 0.5
    update_epochs: int = 4
    num_minibatches: int = 4
    anneal_lr: bool = True
    adam_eps: float = 1e-5
    model: ModelConfig = field(default_factory=ModelConfig)

    def validate(self, path: str) -> None:
        if self.algorithm not in ("PPO", "A2C"):
            _fail(f"{path}.algorithm", f"must be 'PPO' or 'A2C', got {self.algorithm!r}")
        _check_range(path, "gamma", self.gamma, 0.0, 1.0)
        _check_range(path, "gae_lambda", self.gae_lambda, 0.0, 1.0)
        for name in ("lr", "max_grad_norm", "clip_param", "adam_eps"):
            if not getattr(self, name) > 0:
                _fail(f"{path}.{name}", f"must be > 0, got {getattr(self, name)!r}")
        for name in ("vf_loss_coeff", "entropy_coeff"):
            if not getattr(self, name) >= 0:
                _fail(f"{path}.{name}", f"must be >= 0, got {getattr(self, name)!r}")
        for name in ("update_epochs", "num_minibatches"):
            if getattr(self, name) < 1:
                _fail(f"{path}.{name}", f"must be >= 1, got {getattr(self, name)!r}")
        self.model.validate(f"{path}.model")


@dataclass
class TrainerConfig:
    """Rollout sizes, run length, seeding and the Fabric launch settings (per rank)."""

    num_envs: int = 50
    train_batch_size: int = 10000
    num_episodes: int = 500
    total_timesteps: int | None = None
    seed: int = 42
    accelerator: str = "auto"
    devices: int | str = 1
    strategy: str = "auto"
    num_nodes: int = 1
    action_sampler: str = "auto"
    torch_threads: int = 0
    compile: bool = (
        False  # torch.compile each policy's gradient step (one process) or loss (DDP) at warm-up
    )
    capture_video: bool = False
    progress_bar: bool = True

    @property
    def num_steps(self) -> int:
        """Rollout length per env: ``train_batch_size // num_envs``."""
        return self.train_batch_size // self.num_envs

    def validate(self, path: str) -> None:
        for name in ("num_envs", "train_batch_size", "num_episodes", "num_nodes"):
            if getattr(self, name) < 1:
                _fail(f"{path}.{name}", f"must be >= 1, got {getattr(self, name)!r}")
        if self.train_batch_size % self.num_envs:
            _fail(
                f"{path}.train_batch_size",
                f"must be a multiple of num_envs ({self.num_envs}), got {self.train_batch_size}",
            )
        if self.total_timesteps is not None and self.total_timesteps < 1:
            _fail(f"{path}.total_timesteps", f"must be >= 1 or null, got {self.total_timesteps!r}")
        if self.seed < 0:
            _fail(f"{path}.seed", f"must be >= 0, got {self.seed}")
        if self.accelerator not in ("auto", "cpu", "cuda", "gpu"):
            _fail(
                f"{path}.accelerator", f"must be auto, cpu, cuda or gpu, got {self.accelerator!r}"
            )
        if (
            isinstance(self.devices, int)
            and self.devices < 1
            or (isinstance(self.devices, str) and self.devices != "auto")
        ):
            _fail(f"{path}.devices", f"must be an int >= 1 or 'auto', got {self.devices!r}")
        if self.action_sampler not in ("auto", "torch", "numba"):
            _fail(
                f"{path}.action_sampler",
                f"must be auto, torch or numba, got {self.action_sampler!r}",
            )
        if self.torch_threads < 0:
            _fail(
                f"{path}.torch_threads",
                f"must be >= 0 (0: leave torch's default), got {self.torch_threads}",
            )


@dataclass
class SavingConfig:
    """Where and how often to write (iterations); the experiment folder is basedir/name/tag."""

    metrics_log_freq: int = 10
    model_params_save_freq: int = 5000
    basedir: str = "/tmp"
    name: str = "experiment"
    tag: str = "example"

    def validate(self, path: str) -> None:
        for attr in ("metrics_log_freq", "model_params_save_freq"):
            if getattr(self, attr) < 1:
                _fail(f"{path}.{attr}", f"must be >= 1, got {getattr(self, attr)!r}")
        for attr in ("name", "tag"):
            value = getattr(self, attr)
            if not value or "/" in value or value in (".", ".."):
                _fail(
                    f"{path}.{attr}", f"must be a non-empty folder name without '/', got {value!r}"
                )


@dataclass
class EvaluationConfig:
    """Greedy evaluation on separate envs every ``eval_freq`` iterations (0: never)."""

    eval_freq: int = 10
    num_episodes: int = 10
    stop_value: float | None = None
    score_policy: str | None = None

    def validate(self, path: str) -> None:
        if self.eval_freq < 0:
            _fail(f"{path}.eval_freq", f"must be >= 0, got {self.eval_freq}")
        if self.num_episodes < 1:
            _fail(f"{path}.num_episodes", f"must be >= 1, got {self.num_episodes}")


GAMES = {
    "cartpole": "cartpole",
    "cartpole-v1": "cartpole",
    "gpu_envs/cartpole-v1": "cartpole",
    "tag": "tag",
    "tag_continuous": "tag",
    "tag-v0": "tag",
    "gpu_envs/tag-v0": "tag",
    "pendulum": "pendulum",
    "pendulum-v1": "pendulum",
    "gpu_envs/pendulum-v1": "pendulum",
}


def game_of(name: str) -> str:
    """The game ("cartpole", "pendulum" or "tag") a config ``name`` or env id designates."""
    try:
        return GAMES[name.lower()]
    except KeyError:
        raise ConfigError(f"name: unknown game {name!r}; use one of {sorted(set(GAMES))}") from None


@dataclass
class RunConfig:
    """A whole run: the game, its env kwargs, trainer, policies, saving and evaluation."""

    name: str
    env: dict[str, Any] = field(default_factory=dict)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    policy: dict[str, PolicyConfig] = field(default_factory=dict)
    saving: SavingConfig = field(default_factory=SavingConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)

    @property
    def game(self) -> str:
        return game_of(self.name)

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        """Build and check a config from plain data; errors name the offending field."""
        config = _build(cls, data, "")
        config.validate()
        return config

    def validate(self) -> None:
        game_of(self.name)
        if not self.policy:
            _fail("policy", "at least one policy is needed")
        for tag, policy in self.policy.items():
            policy.validate(f"policy.{tag}")
        self.trainer.validate("trainer")
        self.saving.validate("saving")
        self.evaluation.validate("evaluation")
        score = self.evaluation.score_policy
        if score is not None and score not in self.policy:
            _fail(
                "evaluation.score_policy",
                f"{score!r} is not one of the policies {list(self.policy)}",
            )

    def to_dict(self) -> dict:
        """Plain data (the inverse of ``from_dict``)."""
        return dataclasses.asdict(self)


def _build(kind, data, path: str):
    """Convert ``data`` to the annotated type ``kind``, naming ``path`` on mismatch."""
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            _fail(path or "config", f"must be a mapping, got {type(data).__name__}")
        hints = typing.get_type_hints(kind)
        names = [f.name for f in dataclasses.fields(kind)]
        unknown = [key for key in data if key not in names]
        if unknown:
            _fail(_join(path, str(unknown[0])), f"unknown field; allowed: {', '.join(names)}")
        required = [
            f.name
            for f in dataclasses.fields(kind)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        for name in required:
            if name not in data:
                _fail(_join(path, name), "is required")
        return kind(
            **{key: _build(hints[key], value, _join(path, key)) for key, value in data.items()}
        )
    if origin in (Union, types.UnionType):
        options = typing.get_args(kind)
        if data is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _build(option, data, path)
            except ConfigError:
                continue
        _fail(path, f"got {data!r}, expected {_describe(kind)}")
    if origin is list:
        if not isinstance(data, (list, tuple)):
            _fail(path, f"must be a list, got {data!r}")
        (item,) = typing.get_args(kind)
        return [_build(item, value, f"{path}[{i}]") for i, value in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict):
            _fail(path, f"must be a mapping, got {data!r}")
        _, value_kind = typing.get_args(kind)
        return {
            str(key): _build(value_kind, value, _join(path, str(key)))
            for key, value in data.items()
        }
    if kind is Any:
        return data
    if kind is bool:
        if not isinstance(data, bool):
            _fail(path, f"must be true or false, got {data!r}")
        return data
    if kind is int:
        if isinstance(data, bool) or not isinstance(data, int):
            _fail(path, f"must be an int, got {data!r}")
        return data
    if kind is float:
        return _number(data, path)
    if kind is str:
        if not isinstance(data, str):
            _fail(path, f"must be a string, got {data!r}")
        return data
    raise TypeError(f"unsupported config type {kind!r} at {path}")


def _number(data, path: str) -> float:
    """A finite float from a number or a numeric string: YAML 1.1 reads ``1e-3`` (no dot) as a string."""
    if isinstance(data, str):
        try:
            value = float(data)
        except ValueError:
            _fail(path, f"must be a number, got the string {data!r}")
    elif isinstance(data, bool) or not isinstance(data, (int, float)):
        _fail(path, f"must be a number, got {data!r}")
    else:
        value = float(data)
    if not math.isfinite(value):
        _fail(path, f"must be a finite number, got {data!r}")
    return value


def _describe(kind) -> str:
    args = [a.__name__ if isinstance(a, type) else str(a) for a in typing.get_args(kind)]
    return " or ".join("null" if a == "NoneType" else a for a in args)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``dotted.path=value`` overrides (values parsed as YAML) to a copy of ``data``.

    ``policy.runner.lr=0.001``, ``trainer.num_envs=64``, ``policy.agent.model.fc_dims=[32,32]``.
    A path may only name an existing key or a known field of a config section.
    """
    import copy

    result = copy.deepcopy(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r}: expected dotted.path=value")
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError as error:
            raise ConfigError(f"{key}: cannot parse value {text!r} ({error})") from None
        parts = key.split(".")
        node = result
        for depth, part in enumerate(parts[:-1]):
            if not isinstance(node.get(part, {}), dict):
                raise ConfigError(
                    f"{'.'.join(parts[: depth + 1])}: is not a section, cannot set {key}"
                )
            if (
                part not in node
                and not (depth == 0 and part in _SECTIONS)
                and not _is_model(parts, depth)
            ):
                raise ConfigError(
                    f"{'.'.join(parts[: depth + 1])}: no such section (override {item!r})"
                )
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return result


_SECTIONS = ("env", "trainer", "policy", "saving", "evaluation")


def _is_model(parts: list[str], depth: int) -> bool:
    return parts[0] == "policy" and depth == 2 and parts[depth] == "model"


def load_yaml(path: str | Path) -> dict:
    """The plain data of a YAML run config file."""
    try:
        with open(path, encoding="utf8") as handle:
            data = yaml.safe_load(handle)
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return data


def dump_yaml(config: RunConfig, path: str | Path) -> None:
    """Write the resolved config as YAML (``load_yaml`` + ``from_dict`` reads it back equal)."""
    with open(path, "w", encoding="utf8") as handle:
        yaml.safe_dump(config.to_dict(), handle, sort_keys=False)
