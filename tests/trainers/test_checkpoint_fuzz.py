"""Every field of a real checkpoint replaced by a value of another shape, type or range: the
restore refuses it with a ``CheckpointError`` naming the field, before anything is restored; never
a crash, a hang or a silent acceptance (issue 44, item 10).

The checkpoint is one of a tiny CartPole run, trained once per module. Each example writes the
tampered state to a file and resumes it in-process, as ``--resume FILE`` does (``load_checkpoint``
then the trainer's restore): every field that a crafted file can reach memory-unsafe code with
(Adam's moments in torch's fused kernel, the envs' buffers in the kernels, RNG states) fails here
at the restore, before the first step; ``test_crafted_checkpoints`` runs the Adam case as a user
does, in a fresh process.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset
from gpu_envs.trainers.core import TrainingRun
from gpu_envs.trainers.fabric_loop import train

SMALL = [
    "trainer.num_envs=8",
    "trainer.train_batch_size=64",
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
    "saving.metrics_log_freq=1000",
    "saving.model_params_save_freq=1",
    "saving.tag=fuzz",
]
#: The fields of the checkpoint's run config the trainer compares (``NETWORK_FIELDS``); the rest
#: of the config is a record, never restored: only kept plain data (``checkpoint_fields.Plain``).
NETWORK = tuple(f"config.policy.agent.model.{name}" for name in ckpt.NETWORK_FIELDS)
#: Fields a checkpoint may lack (older files, another device's sampler, a frozen policy...).
OPTIONAL = re.compile(
    r"^(opponents|spaces\.continuous|sampler\.counter|rng\[0\]\.cuda"
    r"|policies\.agent\.optimizer\.state\.\d+"
    r"|policies\.agent\.optimizer\.param_groups\[0\]\.(?!params$|lr$|betas$|eps$)\w+)$"
)


def _config(basedir: Path, iterations: int) -> RunConfig:
    overrides = [*SMALL, f"saving.basedir={basedir}", f"trainer.total_timesteps={64 * iterations}"]
    return RunConfig.from_dict(apply_overrides(preset("cartpole"), overrides))


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> tuple[RunConfig, dict]:
    """(the config of a resume, the state of iteration 2 of a 3-iteration CartPole run)."""
    basedir = tmp_path_factory.mktemp("fuzz")
    folder = Path(train(_config(basedir, 3))["experiment"])
    state = torch.load(ckpt.iteration_path(folder / "ckpt", 2), weights_only=True)
    return _config(basedir, 6), state


@pytest.fixture(scope="module")
def mutations(real) -> list[Mutation]:
    return _all_mutations(real[1])


# ------------------------------------------------------------------------------ the fields
#: The keys and list indices from the state to a field.
Steps = tuple[Any, ...]


def _nodes(value: Any, steps: Steps = ()) -> Iterator[tuple[Steps, Any]]:
    """(steps, value) of every field under ``value``, containers included."""
    items = value.items() if isinstance(value, dict) else ()
    if isinstance(value, list | tuple):
        items = enumerate(value)
    for key, item in items:
        yield (*steps, key), item
        yield from _nodes(item, (*steps, key))


def _dotted(steps: Steps, state: dict) -> str:
    """How the refusal names the field: keys joined by dots, list indices in brackets."""
    text, node = "", state
    for step in steps:
        is_index = isinstance(node, list | tuple)
        text += f"[{step}]" if is_index else f"{'.' if text else ''}{step}"
        node = node[step]
    return text


def _node(state: dict, steps: Steps) -> Any:
    for step in steps:
        state = state[step]
    return state


def _set(state: dict, steps: Steps, value: Any) -> None:
    """``state`` with the field at ``steps`` set to ``value`` (a tuple on the way rebuilt)."""
    node = _node(state, steps[:-1])
    if isinstance(node, tuple):
        items = list(node)
        items[steps[-1]] = value
        _set(state, steps[:-1], tuple(items))
    else:
        node[steps[-1]] = value


#: A mutation: (what it does, for the failure message; the fields a refusal may name for it, the
#: first the one it changes; applies it to a copy of the state).
Mutation = tuple[str, tuple[str, ...], Callable[[dict], None]]


def _replace(state: dict, steps: Steps, value: Any) -> Mutation:
    field = _dotted(steps, state)
    names = (field, field[: field.rindex("[")]) if field.endswith("]") else (field,)
    return f"{field} = {_show(value)}", names, lambda tampered: _set(tampered, steps, value)


def _add_key(state: dict, steps: Steps, key: Any) -> Mutation:
    def apply(tampered: dict) -> None:
        _node(tampered, steps)[key] = 1

    field = _dotted(steps, state)
    names = (f"{field}.{key}", field) if field else (str(key),)
    return f"{field}[{key!r}] = 1", names, apply


def _remove(state: dict, steps: Steps) -> Mutation:
    def apply(tampered: dict) -> None:
        del _node(tampered, steps[:-1])[steps[-1]]

    field = _dotted(steps, state)
    names = (field, _dotted(steps[:-1], state)) if len(steps) > 1 else (field,)
    return f"del {field}", names, apply


def _show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor{tuple(value.shape)} {value.dtype}"
    return repr(value)[:60]


def _tensor_values(field: str, tensor: torch.Tensor) -> list[Any]:
    shape = tuple(tensor.shape)
    values: list[Any] = [tensor.new_zeros((*shape, 2)), "abc", None, 3, [1.0], {"x": 1}]
    if shape:
        values += [tensor.new_zeros(shape[:-1]), tensor.new_zeros((*shape[:-1], shape[-1] + 1))]
    else:
        values.append(tensor.new_zeros(3))  # (issue 44: exp_avg -> zeros(3))
    for dtype in (torch.float32, torch.float64, torch.int64, torch.int32, torch.bool, torch.uint8):
        if dtype != tensor.dtype:
            values.append(torch.zeros(shape, dtype=dtype))
    if tensor.dtype == torch.bool and tensor.numel():
        values.append(torch.full(shape, 2, dtype=torch.uint8).view(torch.bool))
    if tensor.is_floating_point() and field.startswith("policies."):
        values.append(torch.full(shape, math.nan, dtype=tensor.dtype))
    if field.endswith((".exp_avg_sq", ".step")):
        values.append(torch.full(shape, -1.0, dtype=tensor.dtype))
    return values


def _number_values(field: str, value: float) -> list[Any]:
    values: list[Any] = [math.nan, math.inf, "abc", None, True, torch.tensor(1.0), [value]]
    if field != "best_eval":
        values += [-1.0, -math.inf]
    if re.search(r"betas\[\d\]$", field):
        values += [1.0, 1.5]
    return values


def _int_values(field: str, value: int, state: dict) -> list[Any]:
    values: list[Any] = [-1, -(2**40), 2**63, 2**70, "abc", None, True, torch.tensor(3), 1.5]
    if field == "iteration":
        values.append(state["num_iterations"] + 1)  # past the checkpoint's own end
    if field == "num_iterations":
        values += [0, state["iteration"] - 1]
    if re.search(r"(params\[\d+\]|action_nvec\[\d+\]|fc_dims\[\d+\]|obs_dim)$", field):
        values += [99, value + 1]  # any other value
    return values


def _mutations(state: dict, steps: Steps, value: Any) -> list[Mutation]:
    """Values of other shapes, types and ranges for the field at ``steps``, each one wrong
    there; for a mapping also an unknown key and each required key removed."""
    field = _dotted(steps, state)
    if _config_record(field):  # only data that is not plain: the record is never restored
        values: list[Any] = [torch.zeros(2), {1: "an int key"}]
    elif field == "config":
        values = [None, "abc", [1], torch.zeros(1)]
    elif isinstance(value, torch.Tensor):
        values = _tensor_values(field, value)
    elif isinstance(value, bool):
        values = [not value, int(value), "abc", None]
    elif isinstance(value, int) and not field.endswith(".weight_decay"):
        values = _int_values(field, value, state)
    elif isinstance(value, int | float):  # (Adam's weight_decay: a number saved as 0)
        values = _number_values(field, value)
    elif isinstance(value, str):
        values = [value + "x", "", 3, None, torch.zeros(1)]
    elif value is None:
        values = [3, "abc", [1], {"x": 1}, torch.zeros(1), True]
    else:  # a mapping or a list
        values = ["abc", 3, torch.zeros(1)]
        if field != "policies.agent.optimizer":  # None: saved untrained, a new optimiser
            values.append(None)
        if isinstance(value, dict):
            values.append(list(value.values()))
        else:
            values += [{"0": value[0]} if value else {}, [*value, *value[-1:]] or [1]]
            values += [list(value[:-1])] if value else []
    mutations = [_replace(state, steps, v) for v in values]
    if isinstance(value, dict) and not _config_record(field) and field != "config":
        mutations += [_add_key(state, steps, "unknown_field"), _add_key(state, steps, 7)]
        mutations += [
            _remove(state, (*steps, key))
            for key in value
            if not OPTIONAL.match(_dotted((*steps, key), state))
        ]
    return mutations


def _config_record(field: str) -> bool:
    return field.startswith("config.") and not field.startswith(NETWORK)


def _all_mutations(state: dict) -> list[Mutation]:
    found = [m for steps, value in _nodes(state) for m in _mutations(state, steps, value)]
    found.append(_add_key(state, (), "unknown_field"))
    found += [_remove(state, (key,)) for key in state if not OPTIONAL.match(key)]
    return found


# ------------------------------------------------------------------------------ the restore
def _names(message: str, names: list[str]) -> bool:
    """Whether ``message`` names one of ``names`` (or a field inside it), not as part of another
    word or of the file's path."""
    return any(re.search(rf"(?<![\w./\[]){re.escape(f)}(?![\w])", message) for f in names)


def _refused(config: RunConfig, state: dict, chosen: list[Mutation], folder: Path) -> None:
    """The checkpoint ``state`` with the ``chosen`` mutations is refused naming one of them."""
    what = "; ".join(w for w, _, _ in chosen)
    tampered = copy.deepcopy(state)
    for _, _, apply in chosen:
        apply(tampered)
    path = folder / "iteration_2.pth.tar"
    torch.save(tampered, path)
    with pytest.raises(ckpt.CheckpointError) as refused:
        loaded = ckpt.LoadedCheckpoint(path, ckpt.load_checkpoint(path))
        TrainingRun(config, torch.device("cpu"), resume=loaded)
    message = str(refused.value)
    assert str(path) in message, (what, message)
    names = [name for _, fields, _ in chosen for name in fields]
    assert _names(message, names), f"{what}: the refusal names none of {names}: {message}"


@pytest.mark.slow
@pytest.mark.timeout(900)  # a hang guard
def test_every_field_replaced_by_each_wrong_value_is_refused_naming_it(real, mutations, tmp_path):
    """Each mutation of ``_mutations``, once, for every field of the checkpoint (which, as
    written, restores)."""
    config, state = real
    path = tmp_path / "iteration_2.pth.tar"
    torch.save(state, path)
    loaded = ckpt.LoadedCheckpoint(path, ckpt.load_checkpoint(path))
    run = TrainingRun(config, torch.device("cpu"), resume=loaded)
    assert (run.iteration, run.resumed_from) == (2, path)
    assert len({fields[0] for _, fields, _ in mutations}) > 100  # every field, containers included
    for mutation in mutations:
        _refused(config, state, [mutation], tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
@settings(max_examples=200)
@given(data=st.data())
def test_fuzzed_fields_are_refused_naming_one_of_them(real, mutations, tmp_path_factory, data):
    """Hypothesis draws up to three mutations of different fields at once."""
    config, state = real
    drawn = data.draw(st.lists(st.sampled_from(mutations), min_size=1, max_size=3))
    chosen: list[Mutation] = []
    for mutation in drawn:  # not one inside another (the outer one replaces the inner)
        if not any(_overlap(mutation[1][0], other[1][0]) for other in chosen):
            chosen.append(mutation)
    _refused(config, state, chosen, tmp_path_factory.mktemp("fuzzed"))


def _overlap(a: str, b: str) -> bool:
    """Whether the field ``a`` is ``b``, or one holds the other."""
    return a == b or a.startswith((f"{b}.", f"{b}[")) or b.startswith((f"{a}.", f"{a}["))
