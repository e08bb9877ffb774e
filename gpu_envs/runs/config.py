"""The run configuration: typed, documented dataclasses read as OmegaConf structured configs.

Shape (the original GPU framework's run config, plus PPO and evaluation fields with defaults)::

    name: cartpole | pendulum | acrobot | mountaincar | ... | tag  # a game of gpu_envs.games
    defaults: gpu_envs | warpdrive              # whose defaults the keys left out take
    env: {...}                                  # keyword arguments of the game's env
    trainer: {num_envs, train_batch_size, num_episodes, total_timesteps, seed, accelerator, ...}
    policy:
      <tag>: {to_train, algorithm, gamma, lr, ..., model: {type, fc_dims, model_ckpt_filepath}}
    saving: {metrics_log_freq, scalars_log_freq, console, progress_seconds,
             model_params_save_freq, keep_last, checkpoint_minutes, basedir, name, tag}
    evaluation: {eval_freq, num_episodes, seed, stop_value, score_policy}
    opponents: {share, snapshot_freq, pool_size}  # self-play against frozen past policies

``RunConfig.from_dict`` merges plain data (a preset, a YAML file, the seed notebook's dict) into
the schema: OmegaConf converts and checks the types (``"1e-3"`` is a float, ``"fast"`` is not)
and refuses unknown keys, then each field's ``Rule`` (its range or choices) and the two rules
between fields run. The keys the data leaves out take the dataclass defaults below, or with
``defaults: warpdrive`` the original framework's (``warpdrive_defaults.WARPDRIVE_DEFAULTS``), which
also
reads its two keys we do not have (``trainer.num_gpus``, ``policy.<tag>.normalize_return``).
Errors are ``ConfigError`` naming the field and the rule (``policy.runner.lr: must be > 0, got
-1.0``). ``apply_overrides`` applies ``a.b.c=value``
strings; ``load_yaml``, ``to_yaml`` and ``dump_yaml`` read and write YAML.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, cast

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    MissingMandatoryValue,
    OmegaConfBaseException,
    ValidationError,
)

from gpu_envs import games as games_registry
from gpu_envs.engine.validation import MAX_SEED
from gpu_envs.runs import warpdrive_defaults
from gpu_envs.runs.errors import ConfigError


@dataclass(frozen=True)
class Rule:
    """A condition on a field's value (not checked on null); ``text`` completes "must be ..."."""

    holds: Callable[[Any], bool]
    text: str


def one_of(*choices: str) -> Rule:
    """The value is one of ``choices``."""
    return Rule(lambda value: value in choices, " or ".join(map(repr, choices)))


POSITIVE = Rule(lambda value: value > 0, "> 0")
NON_NEGATIVE = Rule(lambda value: value >= 0, ">= 0")
AT_LEAST_ONE = Rule(lambda value: value >= 1, ">= 1")
UNIT_INTERVAL = Rule(lambda value: 0 <= value <= 1, "in [0, 1]")
#: A seed: any int the engine's env seeds take (int64); the seeds derived from it (``seed + i``)
#: must stay in that range too (``TrainerConfig.envs_per_rank``, ``_check_relations``).
SEED = Rule(lambda value: 0 <= value <= MAX_SEED, "in [0, 2**63 - 1]")
#: The largest ``trainer.reward_shaping`` (its docstring says why).
MAX_REWARD_SHAPING = 1000.0
#: Set to 1 to let run configs call OmegaConf resolvers (``${oc.env:VAR}``, ...).
RESOLVERS_VARIABLE = "GPU_ENVS_CONFIG_RESOLVERS"
#: What a boolean field takes besides true and false (case ignored): the spellings YAML and
#: OmegaConf read as booleans; any other value (``-58761``, ``2``, ``"maybe"``) is refused.
BOOL_SPELLINGS = {
    **dict.fromkeys(("true", "yes", "y", "on", "1"), True),
    **dict.fromkeys(("false", "no", "n", "off", "0"), False),
}
FOLDER_NAME = Rule(
    lambda value: value not in ("", ".", "..") and "/" not in value,
    "a non-empty folder name without '/'",
)


def ruled(default: Any, rule: Rule) -> Any:
    """A dataclass field with ``default`` (copied per instance when a list) checked by ``rule``."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"rule": rule})
    return field(default=default, metadata={"rule": rule})


@dataclass
class ModelConfig:
    """The policy network: an MLP torso shared by the actor heads and the critic head."""

    type: str = ruled("fully_connected", one_of("fully_connected"))
    """Network kind; only the MLP (the seed config's name for it)."""
    fc_dims: list[int] = ruled(
        [64, 64],
        Rule(
            lambda dims: len(dims) > 0 and all(isinstance(d, int) and d > 0 for d in dims),
            "a non-empty list of ints > 0",
        ),
    )
    """Widths of the torso's hidden layers."""
    model_ckpt_filepath: str = ruled(
        "", Rule(lambda path: not path or Path(path).is_file(), "'' or an existing file")
    )
    """A trainer checkpoint to start this policy's weights from; '' starts from scratch."""
    activation: str = ruled("tanh", one_of("tanh", "relu"))
    """Activation of the hidden layers."""
    ortho_init: bool = True
    """Orthogonal initialisation with CleanRL's gains (sqrt(2) torso, 0.01 actor, 1 critic)."""


@dataclass
class PolicyConfig:
    """One policy: its algorithm, optimiser and loss coefficients (names as in the original)."""

    to_train: bool = True
    """Update this policy; false keeps its initial (or loaded) weights."""
    algorithm: str = ruled("PPO", one_of("PPO", "A2C"))
    """PPO (clipped surrogate, epochs of minibatches) or A2C (one full-batch step per rollout)."""
    gamma: float = ruled(0.99, UNIT_INTERVAL)
    """Discount factor."""
    lr: float = ruled(3e-4, POSITIVE)
    """Adam's learning rate (annealed linearly to 0 over the run with ``anneal_lr``)."""
    gae_lambda: float = ruled(0.95, UNIT_INTERVAL)
    """The lambda of generalised advantage estimation."""
    vf_loss_coeff: float = ruled(0.5, NON_NEGATIVE)
    """Weight of the value loss in the total loss."""
    entropy_coeff: float = ruled(0.01, NON_NEGATIVE)
    """Weight of the entropy bonus in the total loss."""
    clip_param: float = ruled(0.2, POSITIVE)
    """PPO's clipping range of the probability ratio (and of the value with ``clip_vloss``)."""
    clip_vloss: bool = False
    """Clip the value loss around the rollout's values (PPO only)."""
    normalize_advantage: bool = True
    """Normalise the advantages of each minibatch to mean 0, standard deviation 1."""
    clip_grad_norm: bool = True
    """Clip the gradient's global norm to ``max_grad_norm``."""
    max_grad_norm: float = ruled(0.5, POSITIVE)
    """The largest global gradient norm with ``clip_grad_norm``."""
    update_epochs: int = ruled(4, AT_LEAST_ONE)
    """PPO's passes over each rollout (A2C makes one)."""
    num_minibatches: int = ruled(4, AT_LEAST_ONE)
    """PPO's minibatches per pass (A2C uses the whole rollout)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run."""
    adam_eps: float = ruled(1e-5, POSITIVE)
    """Adam's epsilon."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The network."""


@dataclass
class TrainerConfig:
    """Rollout sizes, run length, seeding and the Fabric launch settings (per rank)."""

    num_envs: int = ruled(50, AT_LEAST_ONE)
    """Environments stepped together on each rank (on all ranks with ``batch_scope`` global)."""
    train_batch_size: int = ruled(10000, AT_LEAST_ONE)
    """Env steps per rollout on each rank (on all ranks with ``batch_scope`` global), a multiple
    of ``num_envs`` (``num_steps`` per env)."""
    batch_scope: str = ruled("per_rank", one_of("per_rank", "global"))
    """What ``num_envs`` and ``train_batch_size`` count under DDP: ``per_rank`` (each rank runs
    that many, so the batch of an iteration grows with the ranks) or ``global`` (the totals over
    all ranks, divided among them: ``num_envs`` must be a multiple of the number of processes, and
    the run collects the same env steps per iteration, seeded the same, on any number of them)."""
    num_episodes: int = ruled(500, AT_LEAST_ONE)
    """Run length when ``total_timesteps`` is null: ``num_episodes * episode_length`` env steps."""
    total_timesteps: int | None = ruled(None, AT_LEAST_ONE)
    """Run length in env steps over all ranks; null: use ``num_episodes``."""
    seed: int = ruled(42, SEED)
    """Base seed; env ``i`` of rank ``r`` gets ``seed + r * n + i``, ``n`` the envs of a rank,
    which must stay <= 2**63 - 1. Torch's generators take the seed itself (``seed + r`` on rank
    ``r``); NumPy's and Python's global ones, which take 32 bits, ``seed % 2**32``."""
    reward_shaping: float = ruled(
        0.0,
        Rule(
            lambda value: 0 <= value <= MAX_REWARD_SHAPING,
            f"in [0, {MAX_REWARD_SHAPING:g}] (a larger weight drowns the env's reward)",
        ),
    )
    """Weight ``k`` of potential-based reward shaping (Ng, Harada & Russell 1999; the optimal policy
    is unchanged): PPO learns from ``r + gamma * k * Phi(s') - k * Phi(s)``, ``Phi`` the game's
    ``potential`` (``gpu_envs.games``), 0 at a terminal ``s'``, nothing on an env's reset step.
    Logged returns and evaluations keep the env's reward. 0: off (the only value for a game
    without a potential). At most 1000: the potentials are of order 1, so the shaping term is then
    already ~1000 times the -1 per step of MountainCar's reward, and far larger weights overflow
    the value loss."""
    accelerator: str = ruled("auto", one_of("auto", "cpu", "cuda", "gpu"))
    """Fabric's accelerator ("gpu" is "cuda")."""
    devices: int | str = ruled(
        1, Rule(lambda n: n == "auto" or isinstance(n, int) and n >= 1, "an int >= 1 or 'auto'")
    )
    """Processes (devices) per node."""
    strategy: str = "auto"
    """Fabric's strategy: auto, ddp, ..."""
    num_nodes: int = ruled(1, AT_LEAST_ONE)
    """Machines taking part."""
    action_sampler: str = ruled("auto", one_of("auto", "torch", "numba"))
    """Draws the actions: torch, numba (CPU only) or auto (numba on the CPU, torch elsewhere)."""
    torch_threads: int = ruled(0, NON_NEGATIVE)
    """``torch.set_num_threads`` of each rank; 0: its share of the CPUs, those this process may
    use divided by the processes on its node (at least 1). The share also caps the envs' numba
    threads."""
    collective_timeout: float = ruled(300.0, POSITIVE)
    """Seconds a rank waits for the others in a collective (DDP's gradient all-reduce, the
    metrics, checkpoints), and at start-up for all to connect, before the run fails, naming the
    rank that did not answer when known (Fabric's ``DDPStrategy(timeout=...)``; torch's default
    is 30 minutes)."""
    compile: bool = False
    """``torch.compile`` at warm-up where the analytic step (one process, an ``ActorCritic`` with a
    plain Adam: ``trainers/analytic_step.py``, nothing to compile) does not apply: the whole
    gradient step on one process, the loss under DDP."""
    cuda_graphs: bool = True
    """On CUDA, capture a rollout as one CUDA graph at warm-up and replay it
    (``trainers/cuda_graph_rollout.py``); ignored on the CPU and with opponents."""
    capture_video: bool = False
    """Write a greedy episode's video at each evaluation."""
    progress_bar: bool = True
    """Show the progress (rank 0): a bar on a terminal, else a line every
    ``saving.progress_seconds``."""

    @property
    def num_steps(self) -> int:
        """Rollout length per env: ``train_batch_size // num_envs``."""
        return self.train_batch_size // self.num_envs

    def envs_per_rank(self, processes: int) -> int:
        """The envs each of ``processes`` ranks runs (``batch_scope``); raises ``ConfigError``
        when a global ``num_envs`` does not divide among them, or when the last env's seed
        passes 2**63 - 1."""
        if self.batch_scope == "global" and self.num_envs % processes:
            raise ConfigError(
                f"trainer.num_envs: with batch_scope 'global' it must be a multiple of the number "
                f"of processes ({processes}), got {self.num_envs}"
            )
        envs = self.num_envs if self.batch_scope == "per_rank" else self.num_envs // processes
        if self.seed + processes * envs - 1 > MAX_SEED:
            raise ConfigError(
                f"trainer.seed: env i of rank r gets seed + r * {envs} + i, which must stay <= "
                f"2**63 - 1 with {processes} process(es): at most {MAX_SEED + 1 - processes * envs}"
                f", got {self.seed}"
            )
        return envs


@dataclass
class SavingConfig:
    """Where and how often to write; the experiment folder is ``basedir/name/tag``."""

    metrics_log_freq: int = ruled(10, AT_LEAST_ONE)
    """Write the text logs and results.json, and print the metrics, every this many iterations
    (and at the last)."""
    scalars_log_freq: int = ruled(1, AT_LEAST_ONE)
    """Log the TensorBoard/CSV scalars (CleanRL's names) every this many iterations."""
    console: str = ruled("compact", one_of("compact", "blocks", "none"))
    """What the console prints every ``metrics_log_freq`` iterations: one line per policy
    (compact), the original framework's 40-line blocks (blocks), or nothing (none)."""
    progress_seconds: float = ruled(30.0, POSITIVE)
    """When stdout is not a terminal: print one progress line (iteration, env steps, SPS, return,
    ETA) every this many seconds (a terminal gets a progress bar)."""
    model_params_save_freq: int = ruled(5000, AT_LEAST_ONE)
    """Save a checkpoint every this many iterations (and at the last)."""
    keep_last: int = ruled(0, NON_NEGATIVE)
    """Keep the newest this many ``iteration_<N>.pth.tar`` checkpoints, deleting older ones after
    each save (``ckpt_best.pth.tar`` and the checkpoint just saved always stay); 0 keeps all."""
    checkpoint_minutes: float = ruled(10.0, NON_NEGATIVE)
    """Also save a checkpoint once this many minutes of wall time passed since the last one;
    0: by iterations only."""
    basedir: str = "experiments"
    """Folder holding the experiment folders (relative: under the working directory)."""
    name: str = ruled("experiment", FOLDER_NAME)
    """The experiment's name: the folder under ``basedir`` (``<game>_<algo>`` in the presets)."""
    tag: str | None = ruled(None, FOLDER_NAME)
    """The run's folder under ``name``; null: the start time, ``yymmdd_HHMMSS``."""


@dataclass
class EvaluationConfig:
    """Greedy evaluation on separate envs every ``eval_freq`` iterations (0: never): the same
    evaluator, episodes and seeds as ``gpu-envs evaluate CHECKPOINT --episodes num_episodes
    --seed seed``, so both print the same figure for the same checkpoint."""

    eval_freq: int = ruled(10, NON_NEGATIVE)
    """Evaluate every this many iterations; 0 never evaluates."""
    num_episodes: int = ruled(100, AT_LEAST_ONE)
    """Episodes per evaluation, one env each."""
    seed: int = ruled(0, SEED)
    """Episode ``i`` of every evaluation starts from seed ``seed + i`` (the same episodes each
    time, on every rank), which must stay <= 2**63 - 1."""
    stop_value: float | None = None
    """Stop once the score reaches this mean return; null trains to the end."""
    score_policy: str | None = None
    """The policy whose mean return is the score (best checkpoint, ``stop_value``); null: the
    first policy."""


@dataclass
class OpponentsConfig:
    """Self-play against a pool of frozen opponents (``gpu_envs.trainers.opponents``)."""

    share: float = ruled(0.0, Rule(lambda value: 0 <= value < 1, "in [0, 1)"))
    """Share of each rank's envs set aside for frozen opponents, split evenly among the policies:
    in a policy's part its agents are played by a frozen copy drawn from its pool and only the
    other policies learn. 0: the learning policies play each other in every env."""
    snapshot_freq: int = ruled(10, AT_LEAST_ONE)
    """Iterations between the snapshots of the learning policies added to the pools."""
    pool_size: int = ruled(4, NON_NEGATIVE)
    """Snapshots kept per policy (the newest), besides its initial weights, which stay in the pool
    (near-uniform actions: the random team). 0: the initial weights only."""


#: The values of ``RunConfig.defaults``.
DEFAULTS = ("gpu_envs", "warpdrive")


def game_of(name: str) -> str:
    """The game (a name of ``gpu_envs.games.GAMES``, registered ones included) a config ``name``
    or env id designates."""
    try:
        return games_registry.game(name).name
    except KeyError as error:
        raise ConfigError(f"name: {error.args[0]}") from None


def _is_game(name: str) -> bool:
    try:
        games_registry.game(name)
    except KeyError:
        return False
    return True


@dataclass
class RunConfig:
    """A whole run: the game, its env kwargs, trainer, policies, saving and evaluation."""

    name: str = field(
        metadata={
            "rule": Rule(
                _is_game,
                f"a game of gpu_envs.games ({', '.join(games_registry.GAMES)}) or its env id, or "
                "a registered game (gpu_envs.games.register_game)",
            )
        }
    )
    """The game (or its env id); ``tag_continuous`` is the seed config's name for Tag."""
    defaults: str = ruled("gpu_envs", one_of(*DEFAULTS))
    """Where the keys the config leaves out take their values: ``gpu_envs``, the defaults of these
    dataclasses, or ``warpdrive``, the original framework's
    (``warpdrive_defaults.WARPDRIVE_DEFAULTS``: A2C,
    ``vf_loss_coeff`` 0.01, ``entropy_coeff`` 0.05, a constant learning rate, ...)."""
    env: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the game's env (the game checks them)."""
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """Rollouts, run length, seeding and launch."""
    policy: dict[str, PolicyConfig] = field(
        default_factory=dict, metadata={"rule": Rule(bool, "at least one policy")}
    )
    """The policies by tag: ``agent`` for the single-agent games, ``runner`` and ``tagger``
    for Tag."""
    saving: SavingConfig = field(default_factory=SavingConfig)
    """The experiment folder and how often it is written."""
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    """Periodic greedy evaluation."""
    opponents: OpponentsConfig = field(default_factory=OpponentsConfig)
    """Frozen past opponents in a share of the envs (self-play with a pool)."""

    @property
    def game(self) -> str:
        return game_of(self.name)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Build and check a config from plain data; errors name the offending field."""
        with _named_errors():
            config = cast(RunConfig, OmegaConf.to_object(_typed(data)))
        _check_rules(config, "")
        _check_relations(config)
        return config

    def to_dict(self) -> dict:
        """Plain data (the inverse of ``from_dict``)."""
        return dataclasses.asdict(self)


def _typed(data: Mapping[str, Any]) -> DictConfig:
    """The schema with ``data`` merged in: types converted and checked, unknown keys refused.

    With ``defaults: warpdrive`` the keys ``data`` leaves out are WarpDrive's first."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"config: must be a mapping, got {type(data).__name__}")
    _refuse_resolvers(data, "")
    _check_booleans(data, RunConfig, "")
    if data.get("defaults") == "warpdrive":
        data = warpdrive_defaults.with_warpdrive_defaults(
            warpdrive_defaults.read_warpdrive_keys(data)
        )
    try:
        with _named_errors():
            return cast(DictConfig, OmegaConf.merge(OmegaConf.structured(RunConfig), data))
    except ConfigError:
        misplaced = _misplaced_section(data, RunConfig, "")
        if misplaced is None:
            raise
        path, value = misplaced
        raise ConfigError(f"{path}: must be a mapping, got {value!r}") from None


def _check_rules(node: Any, path: str) -> None:
    """Every float field finite and every field's ``Rule`` met, in ``node`` and its sections."""
    for spec in dataclasses.fields(node):
        value, where = getattr(node, spec.name), f"{path}{spec.name}"
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: must be a finite number, got {value!r}")
        rule = spec.metadata.get("rule")
        if rule is not None and value is not None and not rule.holds(value):
            raise ConfigError(f"{where}: must be {rule.text}, got {value!r}")
        if dataclasses.is_dataclass(value):
            _check_rules(value, f"{where}.")
        elif isinstance(value, dict):
            for key, item in value.items():
                if dataclasses.is_dataclass(item):
                    _check_rules(item, f"{where}.{key}.")


def _check_relations(config: RunConfig) -> None:
    """The rules between fields."""
    trainer, score = config.trainer, config.evaluation.score_policy
    if trainer.train_batch_size % trainer.num_envs:
        raise ConfigError(
            f"trainer.train_batch_size: must be a multiple of num_envs ({trainer.num_envs}), "
            f"got {trainer.train_batch_size}"
        )
    if isinstance(trainer.devices, int):  # else the launch knows the processes (TrainingRun)
        trainer.envs_per_rank(trainer.devices * trainer.num_nodes)
    if trainer.reward_shaping and not games_registry.GAMES[config.game].potential:
        raise ConfigError(
            f"trainer.reward_shaping: {config.game} declares no potential "
            f"(gpu_envs.games.Game.potential), so it must be 0, got {trainer.reward_shaping}"
        )
    share = config.opponents.share
    if share and len(config.policy) < 2:
        raise ConfigError(
            "opponents.share: frozen opponents need two policies or more, "
            f"got {list(config.policy)}"
        )
    if share and int(share * trainer.num_envs) < len(config.policy):
        raise ConfigError(
            f"opponents.share: {share} of trainer.num_envs ({trainer.num_envs}) leaves fewer than "
            f"one env per policy ({len(config.policy)}); raise the share or num_envs"
        )
    evaluation = config.evaluation
    if evaluation.seed + evaluation.num_episodes - 1 > MAX_SEED:
        raise ConfigError(
            f"evaluation.seed: episode i starts from seed + i, which must stay <= 2**63 - 1 with "
            f"num_episodes {evaluation.num_episodes}: at most "
            f"{MAX_SEED + 1 - evaluation.num_episodes}, got {evaluation.seed}"
        )
    if score is not None and score not in config.policy:
        raise ConfigError(
            f"evaluation.score_policy: {score!r} is not one of the policies {list(config.policy)}"
        )


@contextlib.contextmanager
def _named_errors() -> Iterator[None]:
    """Re-raise OmegaConf's errors as ``ConfigError``: ``<field path>: <rule>, got <value>``."""
    try:
        yield
    except OmegaConfBaseException as error:
        raise ConfigError(f"{error.full_key or 'config'}: {_broken_rule(error)}") from None


def _broken_rule(error: OmegaConfBaseException) -> str:
    """What ``error`` says about its field, in the words of ``_check_rules``."""
    owner = error.object_type
    if isinstance(error, MissingMandatoryValue):
        return "is required"
    if isinstance(error, ConfigKeyError | ConfigAttributeError) and dataclasses.is_dataclass(owner):
        return (
            f"unknown field; allowed: {', '.join(spec.name for spec in dataclasses.fields(owner))}"
        )
    hint = _hint_at(error.full_key or "?")
    if isinstance(error, ValidationError) and hint not in (None, Any):
        return f"must be {_in_words(hint)}, got {_shown(error.value)}"
    return str(error.msg or error).splitlines()[0]


def _shown(value: Any) -> str:
    return f"the string {value!r}" if isinstance(value, str) else repr(value)


def _hint_at(key: str) -> Any:
    """The type hint of the field at dotted path ``key`` (None: no such field)."""
    hint: Any = RunConfig
    for part in re.findall(r"[^.\[\]]+", key):
        hint = _child_hint(hint, part)
    return hint


def _check_booleans(value: Any, hint: Any, path: str) -> None:
    """Refuse, in ``value`` given for the field at ``path`` of type ``hint`` (its sections and
    items included), a boolean field's value that is neither a bool nor one of
    ``BOOL_SPELLINGS``: OmegaConf would read any int or numeric string but 0 as true. Before
    the merge, which converts them; an interpolation (``${...}``) is left to OmegaConf."""
    union = typing.get_origin(hint) in (Union, types.UnionType)
    if bool in (typing.get_args(hint) if union else (hint,)):
        if value is None or isinstance(value, bool) or isinstance(value, str) and "${" in value:
            return
        spelling = str(value).lower() if isinstance(value, int | str) else None
        if spelling not in BOOL_SPELLINGS:
            raise ConfigError(
                f"{path}: must be true or false, got {_shown(value)} (yes/no, on/off and 1/0 "
                "are taken too)"
            )
    elif isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            _check_booleans(item, _child_hint(hint, str(key)), where)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_booleans(item, _child_hint(hint, str(index)), f"{path}[{index}]")


def _child_hint(hint: Any, key: str) -> Any:
    """The type hint of item ``key`` of a value of type ``hint`` (None: no such item)."""
    if dataclasses.is_dataclass(hint):
        return typing.get_type_hints(hint).get(key)
    if typing.get_origin(hint) in (dict, list):
        return typing.get_args(hint)[-1]
    return None


_KINDS = {float: "a number", int: "an int", bool: "true or false", str: "a string"}


def _in_words(hint: Any) -> str:
    """A type hint in words: ``float | None`` is "a number or null"."""
    union = typing.get_origin(hint) in (Union, types.UnionType)
    words = []
    for option in typing.get_args(hint) if union else (hint,):
        kind = typing.get_origin(option) or option
        if option is type(None):
            words.append("null")
        elif kind is list:
            words.append("a list")
        elif kind is dict or dataclasses.is_dataclass(kind):
            words.append("a mapping")
        else:
            words.append(_KINDS.get(kind, getattr(kind, "__name__", str(kind))))
    return " or ".join(words)


def _misplaced_section(data: Mapping, hint: Any, path: str) -> tuple[str, Any] | None:
    """``(path, value)`` of a non-mapping where the schema has a section, if any: OmegaConf's
    merge error names no field then."""
    for key, value in data.items():
        inner = _child_hint(hint, str(key))
        if not (dataclasses.is_dataclass(inner) or typing.get_origin(inner) is dict):
            continue
        if not isinstance(value, Mapping):
            return f"{path}{key}", value
        found = _misplaced_section(value, inner, f"{path}{key}.")
        if found is not None:
            return found
    return None


_RESOLVER = re.compile(r"\$\{\s*[\w.-]+\s*:")


def _refuse_resolvers(data: Any, path: str) -> None:
    """Refuse OmegaConf resolver calls (``${oc.env:TOKEN}`` copies an environment variable into the
    run's folder names and ``total_config.yaml``) unless ``GPU_ENVS_CONFIG_RESOLVERS=1``;
    plain references to other fields (``${trainer.seed}``) stay allowed."""
    if os.environ.get(RESOLVERS_VARIABLE) == "1":
        return
    if isinstance(data, Mapping):
        for key, value in data.items():
            _refuse_resolvers(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            _refuse_resolvers(value, f"{path}[{index}]")
    elif isinstance(data, str) and _RESOLVER.search(data):
        raise ConfigError(
            f"{path}: resolver interpolations such as ${{oc.env:...}} are off in run configs "
            f"(they copy the environment into the run's files), got {data!r}; set "
            f"{RESOLVERS_VARIABLE}=1 to allow them"
        )


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict:
    """``data`` (not changed) with ``dotted.path=value`` overrides applied, as plain data.

    ``policy.runner.lr=0.001``, ``trainer.num_envs=64``, ``policy.agent.model.fc_dims=[32,32]``;
    values are parsed as YAML. Types and key names are checked now, ranges by ``from_dict``. An
    override sets a field of an existing policy, not a new policy (a misspelt tag).
    ``defaults=warpdrive`` applies before the keys left out are filled in, so ``data`` must not
    name other ``defaults`` (its keys may be filled in already).
    """
    chosen = [item.partition("=")[2] for item in overrides if item.partition("=")[0] == "defaults"]
    if chosen:  # before the merge: the defaults decide what the keys left out become
        given, wanted = data.get("defaults"), chosen[-1].strip()
        if given is not None and given != wanted:
            raise ConfigError(
                f"defaults: the config says {given!r}: its keys may be filled in with those "
                f"defaults already; put defaults: {wanted} in the config itself (a YAML file "
                "for gpu-envs train --config)"
            )
        data = {**data, "defaults": wanted}
    config = _typed(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r}: expected dotted.path=value")
        parts = key.split(".")
        if parts[0] == "policy" and len(parts) > 2 and parts[1] not in config.policy:
            raise ConfigError(
                f"policy.{parts[1]}: no such policy (override {item!r}); "
                f"the policies are {', '.join(config.policy)}"
            )
        try:
            _check_booleans(_parsed(text), _hint_at(key), key)
            with _named_errors():
                config.merge_with_dotlist([item])
        except yaml.YAMLError as error:
            raise ConfigError(f"{key}: cannot parse value {text!r} ({error})") from None
    return cast(dict, OmegaConf.to_container(config))


def _parsed(text: str) -> Any:
    """The value of an override's text, parsed as ``merge_with_dotlist`` parses it (YAML)."""
    return cast(dict, OmegaConf.to_container(OmegaConf.from_dotlist([f"value={text}"])))["value"]


def set_fields(data: Mapping[str, Any], values: Mapping[str, Any]) -> dict:
    """``data`` (not changed) with the fields at the dotted paths of ``values`` set to those
    Python values as they are (a command-line flag's ``int`` stays an ``int``, no text on the
    way), type-checked by the schema now, ranges by ``from_dict``."""
    config = _typed(data)
    for path, value in values.items():
        _check_booleans(value, _hint_at(path), path)
        with _named_errors():
            OmegaConf.update(config, path, value, merge=False)
    return cast(dict, OmegaConf.to_container(config))


def load_yaml(path: str | Path) -> dict:
    """The plain data of a YAML run config file."""
    try:
        data = OmegaConf.load(path)
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {error}") from None
    if not isinstance(data, DictConfig):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return cast(dict, OmegaConf.to_container(data))


def to_yaml(config: RunConfig) -> str:
    """The config as YAML text."""
    return OmegaConf.to_yaml(OmegaConf.structured(config))


def dump_yaml(config: RunConfig, path: str | Path) -> None:
    """Write the resolved config as YAML (``load_yaml`` + ``from_dict`` reads it back equal)."""
    Path(path).write_text(to_yaml(config), encoding="utf8")
