"""A checkpoint checked field by field against the run that restores it, before anything of it is
restored.

``training_spec`` describes what a run restores, from the run's own objects: each tensor's shape
and dtype (on the CPU, where ``load_checkpoint`` puts every tensor; contiguous, dense), each
counter's type and range, each mapping's keys (an unknown one is refused, as a missing one).
``check(state, spec, path)`` walks a checkpoint against it and raises ``CheckpointError`` naming
the file and the first field that does not fit (``policies.agent.optimizer.state.0.exp_avg``,
``rng[0].env.obs``), so that nothing a crafted file holds reaches ``load_state_dict``, torch's
fused Adam, ``torch.set_rng_state`` or the envs' kernels unchecked.

``restorable(loaded, check_one, say)``: the checkpoint to restore, or, for one ``--resume`` found
in a run's folder (``LoadedCheckpoint.searched``), the newest older one of the folder that passes
``check_one``, each one it skips named in one line; a checkpoint the user named is refused with the
previous good one named in the message (docs/checkpoints.md).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gpu_envs.runs.checkpoint import (
    FORMAT,
    CheckpointError,
    LoadedCheckpoint,
    iteration_checkpoints,
    iteration_number,
    load_checkpoint,
    plain_equal,
    short_repr,
)

#: The largest counter a checkpoint may hold (torch's int64).
MAX_COUNT = 2**63 - 1


class Mismatch(Exception):
    """A field of a checkpoint that does not fit its spec: ``field`` (dotted) and ``why``."""

    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field, self.why = field, why


def _found(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return short_repr(value)
    return f"the {type(value).__name__} {short_repr(value)}"


class Spec:
    """What one field must hold; ``check`` raises ``Mismatch`` for a value that does not."""

    def check(self, value: Any, field: str) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class TensorSpec(Spec):
    """A dense, contiguous CPU tensor of ``shape`` (None: any size on that axis) and one of
    ``dtypes``; ``finite``: no NaN or inf; ``nonnegative``: no value below 0. A bool tensor holds
    only 0 and 1 bytes."""

    shape: tuple[int | None, ...]
    dtypes: tuple[torch.dtype, ...]
    finite: bool = False
    nonnegative: bool = False

    def check(self, value: Any, field: str) -> None:
        kinds = " or ".join(str(d) for d in self.dtypes)
        shape = tuple("any" if n is None else n for n in self.shape)
        expected = f"expected a {shape} {kinds} tensor"
        if not isinstance(value, torch.Tensor):
            raise Mismatch(field, f"{_found(value)}, {expected}")
        if value.layout != torch.strided or value.device.type != "cpu" or value.is_quantized:
            raise Mismatch(field, f"a {value.layout} tensor on {value.device}, {expected}")
        fits = len(value.shape) == len(self.shape) and all(
            n is None or n == m for n, m in zip(self.shape, value.shape)
        )
        if not fits or value.dtype not in self.dtypes:
            raise Mismatch(field, f"{_found(value)}, {expected}")
        if not value.is_contiguous():
            raise Mismatch(field, f"a non-contiguous tensor (strides {value.stride()})")
        if value.dtype == torch.bool and bool((value.view(torch.uint8) > 1).any()):
            raise Mismatch(field, "a bool tensor holding bytes other than 0 and 1")
        if self.finite and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise Mismatch(field, "holds NaN or inf")
        if self.nonnegative and bool((value < 0).any()):
            raise Mismatch(field, "holds negative values")


@dataclass(frozen=True)
class IntSpec(Spec):
    """A Python int (not a bool) from ``low`` to ``MAX_COUNT``."""

    low: int = 0

    def check(self, value: Any, field: str) -> None:
        if type(value) is not int or not self.low <= value <= MAX_COUNT:
            raise Mismatch(field, f"{_found(value)}, expected an int >= {self.low} (below 2**63)")


#: The largest finite float.
FINITE = sys.float_info.max


@dataclass(frozen=True)
class NumberSpec(Spec):
    """A Python int or float (not a bool, not NaN) from ``low`` to ``high``, ``what`` in words."""

    low: float
    high: float
    what: str

    def check(self, value: Any, field: str) -> None:
        if type(value) not in (int, float) or not self.low <= value <= self.high:
            raise Mismatch(field, f"{_found(value)}, expected {self.what}")


@dataclass(frozen=True)
class Same(Spec):
    """Exactly ``value`` (of its type: ``True`` is not ``1``; a list may be saved as a tuple)."""

    value: Any

    def check(self, value: Any, field: str) -> None:
        if not plain_equal(value, self.value):
            raise Mismatch(field, f"{_found(value)}, expected {self.value!r} (this run's)")


@dataclass(frozen=True)
class Record(Spec):
    """A mapping with exactly the keys of ``fields`` (those of ``optional`` may be missing), each
    value fitting its spec; the keys of each group of ``together`` are all there or none."""

    fields: Mapping[Any, Spec]
    optional: frozenset = frozenset()
    together: tuple[frozenset, ...] = ()

    def check(self, value: Any, field: str) -> None:
        if not isinstance(value, Mapping):
            raise Mismatch(field, f"{_found(value)}, expected a mapping")
        unknown = [k for k in value if k not in self.fields]
        if unknown:
            raise Mismatch(_join(field, unknown[0]), "an unknown field (this run has no such one)")
        for key, spec in self.fields.items():
            if key in value:
                spec.check(value[key], _join(field, key))
            elif key not in self.optional:
                raise Mismatch(_join(field, key), "missing")
        for group in self.together:
            present = group & set(value)
            if present and present != group:
                raise Mismatch(_join(field, sorted(group - present)[0]), "missing")


@dataclass(frozen=True)
class Items(Spec):
    """A list (or tuple) of exactly ``len(items)`` values, each fitting its spec."""

    items: tuple[Spec, ...]

    def check(self, value: Any, field: str) -> None:
        if not isinstance(value, list | tuple) or len(value) != len(self.items):
            raise Mismatch(field, f"{_found(value)}, expected a list of {len(self.items)}")
        for index, (item, spec) in enumerate(zip(value, self.items)):
            spec.check(item, f"{field}[{index}]")


@dataclass(frozen=True)
class ListOf(Spec):
    """A list (or tuple) of at most ``longest`` values, each fitting ``item``."""

    item: Spec
    longest: int

    def check(self, value: Any, field: str) -> None:
        if not isinstance(value, list | tuple) or len(value) > self.longest:
            raise Mismatch(field, f"{_found(value)}, expected a list of at most {self.longest}")
        for index, entry in enumerate(value):
            self.item.check(entry, f"{field}[{index}]")


@dataclass(frozen=True)
class NoneOr(Spec):
    """None, or a value fitting ``spec``."""

    spec: Spec

    def check(self, value: Any, field: str) -> None:
        if value is not None:
            self.spec.check(value, field)


class PlainData(Spec):
    """A mapping of plain data (what a YAML config holds): str-keyed mappings, lists, str, int,
    float, bool, None."""

    def check(self, value: Any, field: str) -> None:
        if not isinstance(value, Mapping):
            raise Mismatch(field, f"{_found(value)}, expected a mapping")
        _check_plain(value, field)


def _check_plain(value: Any, field: str) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if type(key) is not str:
                raise Mismatch(field, f"a key {_found(key)}, expected str keys")
            _check_plain(item, _join(field, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_plain(item, f"{field}[{index}]")
    elif not (value is None or type(value) in (str, int, float, bool)):
        raise Mismatch(field, f"{_found(value)}, expected plain data (as a YAML config holds)")


def _join(field: str, key: Any) -> str:
    name = key if isinstance(key, str | int) else repr(key)
    return f"{field}.{name}" if field else str(name)


def like(value: Any, finite: bool = False) -> Spec:
    """The spec of data shaped like the live ``value``: tensors of its shapes and dtypes
    (``finite``: floating ones without NaN or inf), mappings of its keys, lists of its length,
    non-negative ints, numbers, and any other value equal to it."""
    if isinstance(value, torch.Tensor):
        return TensorSpec(tuple(value.shape), (value.dtype,), finite=finite)
    if isinstance(value, Mapping):
        return Record({k: like(v, finite) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return Items(tuple(like(v, finite) for v in value))
    if type(value) is int:
        return IntSpec()
    if type(value) is float:
        return NumberSpec(-math.inf, math.inf, "a number")
    return Same(value)


def adam_spec(optimizer: torch.optim.Optimizer) -> Spec:
    """The ``state_dict`` of ``optimizer`` (a ``torch.optim.Adam``) as this run would save it:
    per parameter (indexed in the order of its groups) ``step`` (a finite scalar, at least 0) and
    ``exp_avg`` / ``exp_avg_sq`` (and ``max_exp_avg_sq`` with amsgrad) of the parameter's shape and
    dtype, finite, the squares not negative; its groups, each of as many parameters, with
    finite non-negative ``lr``, ``eps``, ``weight_decay``, ``betas`` in [0, 1) and this run's
    flags (``fused``, ``amsgrad``, ... choose the kernels that run)."""
    groups, moments = [], {}
    first = 0
    for group in optimizer.param_groups:
        params = group["params"]
        hyper = {k: _hyper_spec(k, v) for k, v in group.items() if k != "params"}
        hyper["params"] = Same(list(range(first, first + len(params))))
        required = {"params", "lr", "betas", "eps"}
        groups.append(Record(hyper, optional=frozenset(set(hyper) - required)))
        for index, param in enumerate(params, first):
            shape = (tuple(param.shape), (param.dtype,))
            fields = {
                "step": TensorSpec((), (torch.float32, torch.get_default_dtype()), True, True),
                "exp_avg": TensorSpec(*shape, finite=True),
                "exp_avg_sq": TensorSpec(*shape, finite=True, nonnegative=True),
            }
            if group.get("amsgrad"):
                fields["max_exp_avg_sq"] = TensorSpec(*shape, finite=True, nonnegative=True)
            moments[index] = Record(fields)
        first += len(params)
    return Record(
        {
            "state": Record(moments, optional=frozenset(moments)),
            "param_groups": Items(tuple(groups)),
        }
    )


def _hyper_spec(key: str, value: Any) -> Spec:
    if key == "betas":
        beta = NumberSpec(0.0, 1.0 - 1e-12, "a number in [0, 1)")
        return Items((beta, beta))
    if type(value) in (int, float):  # lr, eps, weight_decay
        return NumberSpec(0.0, FINITE, "a finite number >= 0")
    return Same(value)  # flags and None: this run's


@dataclass(frozen=True)
class AnyData(Spec):
    """Str-keyed mappings and lists of CPU tensors and plain data: a state this run does not
    restore, which need only be data."""

    def check(self, value: Any, field: str) -> None:
        if isinstance(value, torch.Tensor):
            if value.layout != torch.strided or value.device.type != "cpu":
                raise Mismatch(field, f"a {value.layout} tensor on {value.device}")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if type(key) is not str:
                    raise Mismatch(
                        field, f"a mapping with the key {_found(key)}, expected str keys"
                    )
                self.check(item, _join(field, key))
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                self.check(item, f"{field}[{index}]")
        else:
            _check_plain(value, field)


def pool_spec(pool: Mapping | None, models: Mapping[str, Mapping], longest: int) -> Spec:
    """The opponent pool's state (``trainers.opponents.OpponentPool.state_dict``; ``pool``, this
    run's): each policy's initial weights and at most ``longest`` snapshots, of the shapes of
    ``models``, a rollout count and the generator's state. A run without a pool restores none:
    the checkpoint's is None or only needs to look like one."""
    if pool is None:
        loose = {"initial": AnyData(), "snapshots": AnyData(), "rollouts": IntSpec()}
        return NoneOr(Record({**loose, "generator": TensorSpec((None,), (torch.uint8,))}))
    weights = {tag: like(state, finite=True) for tag, state in models.items()}
    return Record(
        {
            "initial": Record(weights),
            "snapshots": Record({tag: ListOf(spec, longest) for tag, spec in weights.items()}),
            "rollouts": IntSpec(),
            "generator": like(pool["generator"]),
        }
    )


def rank_spec(rank: Mapping[str, Any]) -> Record:
    """One process's entry of ``rng``, ``rank`` shaped as this run saves it: its RNG states
    (``cuda`` may be missing, or of any size where this run has no GPU) and its envs' buffers with
    the rollout's carry-over (all of them, or none: the envs then start new episodes)."""
    fields = {key: like(value) for key, value in rank.items()}
    fields.setdefault("cuda", TensorSpec((None,), (torch.uint8,)))
    carry = frozenset(fields) - {"torch", "cuda"}
    return Record(fields, optional=carry | {"cuda"}, together=(carry,))


def training_spec(
    *,
    spaces: Mapping[str, Any],
    models: Mapping[str, Mapping[str, torch.Tensor]],
    optimizers: Mapping[str, torch.optim.Optimizer | None],
    rank: Mapping[str, Any],
    world_size: int,
    pool: Mapping | None,
    pool_size: int,
) -> Record:
    """The whole checkpoint a run restores (``checkpoint.training_state``): ``spaces`` its
    ``{obs_dim, action_nvec, continuous}``; per policy tag its ``models`` (state dicts) and
    ``optimizers`` (None: not trained, and the checkpoint's is not restored); ``rank`` one
    process's state (``rank_spec``), as many as ``world_size``; the opponent ``pool``'s state (see
    ``pool_spec``). The checkpoint's config is a record (plain data, compared by
    ``checkpoint.check_resume_config``), never restored."""
    policies = {}
    for tag, model in models.items():
        optimizer = optimizers[tag]
        saved = AnyData() if optimizer is None else adam_spec(optimizer)
        policies[tag] = Record({"model": like(model, finite=True), "optimizer": NoneOr(saved)})
    return Record(
        {
            "format": Same(FORMAT),
            "iteration": IntSpec(),
            "env_step": IntSpec(),
            "num_iterations": IntSpec(1),
            "counters": Record(
                {
                    "total_episodes": IntSpec(),
                    "train_seconds": NumberSpec(0.0, FINITE, "a finite number >= 0"),
                    "evaluations": IntSpec(),
                }
            ),
            "best_eval": NumberSpec(-math.inf, FINITE, "a finite number, or -inf (no evaluation)"),
            "config": PlainData(),
            "spaces": Record(
                {key: Same(value) for key, value in spaces.items()},
                optional=frozenset({"continuous"}),
            ),
            "policies": Record(policies),
            "sampler": SAMPLER,
            "rng": Items((rank_spec(rank),) * world_size),
            "opponents": pool_spec(pool, models, pool_size),
        },
        optional=frozenset({"opponents"}),
    )


#: Either action sampler's state (``trainers.sampling``): the numba one's draw counter, which the
#: torch one has none of (a checkpoint may come from a run on another device, with the other one).
SAMPLER = Record({"counter": IntSpec()}, optional=frozenset({"counter"}))


def check(state: Mapping, path: str | Path, spec: Spec) -> None:
    """Raise ``CheckpointError`` naming ``path`` and the first field of ``state`` that does not fit
    ``spec``, or an ``iteration`` past the checkpoint's own ``num_iterations``."""
    try:
        spec.check(state, "")
    except Mismatch as mismatch:
        raise CheckpointError(
            f"checkpoint {path}: the field '{mismatch.field}' is {mismatch.why}; the file is "
            "damaged or was not written for this run"
        ) from None
    if state["iteration"] > state["num_iterations"]:
        raise CheckpointError(
            f"checkpoint {path}: the field 'iteration' is {state['iteration']}, past its field "
            f"'num_iterations' {state['num_iterations']}; the file is damaged"
        )


def restorable(
    loaded: LoadedCheckpoint, check_one: Callable[[dict, Path], None], say: Callable[[str], None]
) -> LoadedCheckpoint:
    """``loaded`` if ``check_one(state, path)`` accepts it (it raises ``CheckpointError``
    otherwise). A refused one that ``--resume`` took from a run's folder (``loaded.searched``) gives
    way to the newest older ``iteration_<N>.pth.tar`` of its folder that reads and passes, each
    one skipped named in one line to ``say``; one the user named is refused, naming that previous
    good checkpoint for ``--resume`` when there is one."""
    try:
        check_one(loaded.state, loaded.path)
        return loaded
    except CheckpointError as error:
        refused = error
    if loaded.searched:
        say(f"--resume: skipping {loaded.path}: {refused}")
    for older in _older(loaded.path):
        try:
            candidate = LoadedCheckpoint(older, load_checkpoint(older), loaded.searched)
            check_one(candidate.state, older)
        except CheckpointError as error:
            if loaded.searched:
                say(f"--resume: skipping {older}: {error}")
            continue
        if loaded.searched:
            return candidate
        raise CheckpointError(
            f"{refused}. The run's previous good checkpoint is {older}: resume from it with "
            f"--resume {older}"
        )
    raise refused


def _older(path: Path) -> list[Path]:
    """The iteration checkpoints of ``path``'s folder before ``path`` (all but it, when it is no
    iteration checkpoint), newest first."""
    files = [p for p in iteration_checkpoints(path.parent) if p != path]
    number = iteration_number(path)
    return files if number is None else [p for p in files if (iteration_number(p) or 0) < number]
