"""Checkpoints: written atomically, read with ``torch.load(weights_only=True)``, checked on load.

A checkpoint is a dict of plain data and tensors::

    format, iteration, env_step, num_iterations (the LR schedule's position and length),
    counters {total_episodes, ...}, best_eval, config (the resolved run config),
    spaces {obs_dim, action_nvec},
    policies {<tag>: {model, optimizer}},
    sampler (the action sampler's state),
    rng [per rank: {torch, cuda, env (the envs' buffers), obs, prev_done, episode_returns,
         episode_lengths}] (what the rank's rollouts continue from; one entry per process),
    opponents (the frozen-opponent pool's state, or None)

Writing goes to a temporary file in the same folder, fsync, then ``os.replace``: a run killed at any
moment leaves either the previous checkpoint or the new one (plus, at worst, a leftover temporary
file that ``remove_temporary_files`` deletes), never a truncated checkpoint; the file gets the mode
the umask gives any other file (``FILE_MODE``). Weights that are not finite are never written, nor
read. Reading checks every field the trainers use; a resume first checks that its run config keeps
``RESUME_FIXED`` (``check_resume_config``), then the whole network description (``NETWORK_FIELDS``
of each policy's model config, the observation size and the action heads), not only the parameter
shapes; ``rank_states`` checks the per-rank states a resume puts back (as many as the run has
processes, each RNG state of the generator's dtype and size). ``checkpoint_fields`` then checks
every other field against the run, field by field, before anything is restored, and picks the
previous good checkpoint of a refused one. ``prune_checkpoints`` keeps the newest
``saving.keep_last`` of a folder's iteration checkpoints.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from gpu_envs.runs.config import ModelConfig, RunConfig

FORMAT = "gpu_envs.runs.checkpoint/1"
#: The fields of a policy's ``model`` config that define its network (the rest only initialise it).
NETWORK_FIELDS = ("type", "fc_dims", "activation")
#: The run config fields a resume cannot change (``check_resume_config``), each with why; the
#: policies' tags and ``NETWORK_FIELDS`` too, and the number of processes (``rank_states``).
RESUME_FIXED = {
    "name": "the checkpoint holds this game's envs and networks",
    "env": "the checkpoint holds envs of these parameters, mid-episode",
    "trainer.num_envs": "the checkpoint holds this many envs per process, mid-episode",
    "trainer.batch_scope": "the checkpoint holds this many envs per process, mid-episode",
    "trainer.train_batch_size": "the iteration count and the learning-rate schedule depend on it",
    "trainer.seed": "the random state comes from the checkpoint: a seed starts a new run only",
}
_RESUME_ADVICE = (
    "resume with the run's own value (`--resume RUN` alone takes the run's config), or start a "
    "new run from its weights with policy.<tag>.model.model_ckpt_filepath=CHECKPOINT"
)


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


#: What the umask makes of a new file's mode (0o644 under umask 022), computed once: the mode of
#: checkpoint files, which ``tempfile.mkstemp`` would leave 0o600.
FILE_MODE = _umask_mode()

_ITERATION_FILE = re.compile(r"^iteration_(\d+)\.pth\.tar$")
_TEMPORARY_FILE = re.compile(r"^\..+\.pth\.tar\..+\.tmp$")  # what save_checkpoint's mkstemp names
_REQUIRED = (
    "iteration",
    "env_step",
    "num_iterations",
    "counters.total_episodes",
    "counters.train_seconds",
    "counters.evaluations",
    "best_eval",
    "config.name",
    "config.policy",
    "spaces.obs_dim",
    "spaces.action_nvec",
    "policies",
    "sampler",
    "rng",
)


class LoadedCheckpoint(NamedTuple):
    """A checkpoint read once (``load_checkpoint``) and handed on: its file and its state;
    ``searched``: taken as the newest readable one of a run's folder, not named by the user (a
    restore that refuses it falls back to an older one: ``checkpoint_fields.restorable``)."""

    path: Path
    state: dict
    searched: bool = False


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or written, or does not fit the run that loads it."""


class RunFolderError(RuntimeError):
    """A run folder cannot be used: another process writes it, or a symlink stands where it goes
    (``experiment.fresh_root``, ``run_control.FolderLock``)."""


def training_state(
    run: Any,
    config: Any,
    action_nvec: Sequence,
    continuous: bool,
    counters: Mapping[str, Any],
    best_eval: float,
    rng: list[dict],
) -> dict:
    """The checkpoint of a training ``run``: the Fabric ``Trainer`` or the Lightning module, which
    both keep ``iteration``, ``env_step``, ``num_iterations``, ``game``, ``groups`` and
    ``sampler``; ``counters`` holds ``total_episodes``, ``train_seconds`` and ``evaluations``."""
    pool = getattr(run.collector, "opponents", None)
    return {
        "iteration": run.iteration,
        "env_step": run.env_step,
        "num_iterations": run.num_iterations,
        "counters": dict(counters),
        "best_eval": best_eval,
        "config": config.to_dict(),
        "spaces": {
            "obs_dim": run.game.obs_dim,
            "action_nvec": list(action_nvec),
            "continuous": continuous,
        },
        "policies": {
            group.tag: {
                "model": group.module.state_dict(),
                # Fabric and Lightning wrap the optimiser; its state is the wrapped one's
                "optimizer": None
                if group.optimizer is None
                else getattr(group.optimizer, "optimizer", group.optimizer).state_dict(),
            }
            for group in run.groups
        },
        "sampler": run.sampler.state_dict(),
        "rng": rng,
        "opponents": None if pool is None else pool.state_dict(),
    }


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write ``state`` to ``path`` atomically (temp file + fsync + ``os.replace``).

    Refuses (``CheckpointError``, nothing written) when a policy's weights hold NaN or inf.
    """
    path = Path(path)
    bad = _non_finite_weight(state)
    if bad is not None:
        raise CheckpointError(
            f"refusing to write {path}: {bad} holds NaN or inf (the training diverged); "
            f"the checkpoints already written keep their finite weights"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(handle, FILE_MODE)
        with os.fdopen(handle, "wb") as file:
            torch.save({"format": FORMAT, **state}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _non_finite_weight(state: Mapping) -> str | None:
    """The name (``policies.<tag>.model.<key>``) of the first policy weight of ``state`` that holds
    NaN or inf, or None."""
    policies = state.get("policies")
    named = [
        (f"policies.{tag}.model.{key}", tensor)
        for tag, saved in (policies.items() if isinstance(policies, Mapping) else ())
        if isinstance(saved, Mapping) and isinstance(saved.get("model"), Mapping)
        for key, tensor in saved["model"].items()
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point()
    ]
    if not named:
        return None
    finite = torch.stack([torch.isfinite(tensor).all() for _, tensor in named]).cpu()  # one read
    return None if finite.all() else named[int((~finite).nonzero()[0])][0]


def remove_temporary_files(folder: str | Path) -> list[Path]:
    """Delete the temporary files a killed ``save_checkpoint`` left in ``folder``; returns them."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    leftovers = [p for p in folder.iterdir() if _TEMPORARY_FILE.match(p.name) and p.is_file()]
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)
    return leftovers


def _torch_load(path: Path):
    """``torch.load(weights_only=True)``; a ``CheckpointError`` saying why when the file is
    unusable."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:  # weights_only refused a pickled object
        found = re.search(r"GLOBAL (\S+)", str(error))
        reason = (
            f"it holds a pickled Python object{f' ({found.group(1)})' if found else ''}, which "
            f"gpu-envs checkpoints never do"
        )
    except Exception as error:
        reason = str(error).split(". ")[0].strip() or f"{type(error).__name__}: the file ends early"
    raise CheckpointError(
        f"{path} is corrupt or not a torch checkpoint written by gpu-envs ({reason})"
    )


def _field(state: dict, dotted: str, path: Path):
    """``state[a][b]...`` for ``dotted`` ``"a.b..."``; a ``CheckpointError`` naming the missing
    field."""
    node = state
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            raise CheckpointError(
                f"checkpoint {path} has no field '{dotted}': the file is damaged or was "
                f"not written by this version of the gpu-envs trainers"
            )
        node = node[key]
    return node


def load_checkpoint(path: str | Path) -> dict:
    """Read a checkpoint written by ``save_checkpoint`` (tensors on the CPU), checking its
    fields."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = _torch_load(path)
    except CheckpointError as error:
        raise CheckpointError(f"checkpoint {error}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(
            f"checkpoint {path} is not a gpu-envs trainer checkpoint "
            f"(format {found!r}, expected {FORMAT!r})"
        )
    for dotted in _REQUIRED:
        _field(state, dotted, path)
    if not isinstance(state["policies"], Mapping):
        raise CheckpointError(
            f"checkpoint {path}: the field 'policies' is {short_repr(state['policies'])}, "
            "expected a mapping of policy tags"
        )
    for tag in state["policies"]:
        for dotted in (
            f"policies.{tag}.model",
            f"policies.{tag}.optimizer",
            *(f"config.policy.{tag}.model.{name}" for name in NETWORK_FIELDS),
        ):
            _field(state, dotted, path)
    bad = _non_finite_weight(state)
    if bad is not None:
        raise CheckpointError(
            f"checkpoint {path}: {bad} holds NaN or inf; its policies cannot play or train (take "
            "an earlier checkpoint)"
        )
    return state


def iteration_path(folder: str | Path, iteration: int) -> Path:
    """``<folder>/iteration_<N>.pth.tar``."""
    return Path(folder) / f"iteration_{iteration}.pth.tar"


def recorded_best(path: str | Path) -> float:
    """The score (``best_eval``) the best checkpoint at ``path`` (``ckpt_best.pth.tar``) was
    written with, read without its tensors (``mmap``); -inf when there is none. A file that cannot
    be read, or records no finite score, counts as none: a warning names it, and the next
    evaluation's checkpoint replaces it."""
    path = Path(path)
    if not path.is_file():
        return -math.inf
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # any unreadable file: what torch.load says is in the warning
        found = f"it cannot be read ({str(error).split('. ')[0]})"
    else:
        score = state.get("best_eval") if isinstance(state, dict) else None
        if isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score):
            return float(score)
        found = f"it records the score {short_repr(score)}"
    warnings.warn(
        f"{path}: {found}; the next evaluation's best checkpoint replaces it", stacklevel=2
    )
    return -math.inf


def iteration_number(path: str | Path) -> int | None:
    """N of a file named ``iteration_<N>.pth.tar``; None for any other name."""
    found = _ITERATION_FILE.match(Path(path).name)
    return None if found is None else int(found.group(1))


def iteration_checkpoints(folder: str | Path) -> list[Path]:
    """The ``iteration_<N>.pth.tar`` files of ``folder``, largest N first (empty if none)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(n, p) for p in folder.iterdir() if (n := iteration_number(p)) is not None]
    return [p for _, p in sorted(found, reverse=True)]


def prune_checkpoints(folder: str | Path, keep_last: int, written: Path) -> list[Path]:
    """Delete the ``iteration_<N>.pth.tar`` files of ``folder`` beyond the ``keep_last`` largest N
    (0 deletes none), never ``written``, the checkpoint just saved; returns them.
    ``ckpt_best.pth.tar`` is no iteration file: it stays."""
    if not keep_last:
        return []
    old = [p for p in iteration_checkpoints(folder)[keep_last:] if p != written]
    for path in old:
        path.unlink(missing_ok=True)
    return old


def latest_readable_checkpoint(folder: str | Path) -> LoadedCheckpoint | None:
    """The newest ``iteration_<N>.pth.tar`` of ``folder`` that ``load_checkpoint`` accepts, with
    the state it read (None if none).

    Each newer file it skips (damaged, incomplete) is named in a warning with the reason.
    """
    for path in iteration_checkpoints(folder):
        try:
            state = load_checkpoint(path)
        except CheckpointError as error:
            warnings.warn(f"--resume: skipping {path}: {error}", stacklevel=2)
            continue
        return LoadedCheckpoint(path, state, searched=True)
    return None


def check_resume_config(saved: RunConfig, config: RunConfig, path: str | Path) -> None:
    """Raise ``CheckpointError`` unless ``config``, the run config resuming the checkpoint at
    ``path``, keeps ``saved`` (the checkpoint's) in every field of ``RESUME_FIXED``, the policies'
    tags and their ``NETWORK_FIELDS``; the message names the field and both values. The rest may
    change: run length, cadences, evaluation, learning hyperparameters (docs/checkpoints.md)."""
    if set(saved.policy) != set(config.policy):
        raise CheckpointError(
            f"checkpoint {path} holds policies {sorted(saved.policy)}, this run has "
            f"{sorted(config.policy)}; {_RESUME_ADVICE}"
        )
    was, now = saved.to_dict(), config.to_dict()
    was["name"], now["name"] = saved.game, config.game  # an env id names its game
    networks = {
        f"policy.{tag}.model.{name}": f"policy '{tag}' has a different network"
        for tag in config.policy
        for name in NETWORK_FIELDS
    }
    for field, why in {**RESUME_FIXED, **networks}.items():
        if _at(was, field) != _at(now, field):
            raise CheckpointError(
                f"checkpoint {path}: {field} is {_at(was, field)!r} in the checkpoint, "
                f"{_at(now, field)!r} in this run, and it cannot change on resume ({why}); "
                f"{_RESUME_ADVICE}"
            )


def _at(data: Mapping, dotted: str) -> Any:
    for key in dotted.split("."):
        data = data[key]
    return data


def check_compatible(
    state: dict,
    path: str | Path,
    obs_dim: int,
    action_nvec,
    modules: dict[str, torch.nn.Module],
    models: dict[str, ModelConfig],
) -> None:
    """Raise ``CheckpointError`` unless ``state`` (from ``load_checkpoint``) holds the same
    policies and networks: observation size, action heads, each policy's ``NETWORK_FIELDS``
    (``models``, the run's model configs) and parameter shapes (``modules``)."""
    spaces = _field(state, "spaces", Path(path))
    saved_obs, saved_nvec = spaces["obs_dim"], spaces["action_nvec"]
    if not plain_equal(saved_obs, obs_dim) or not plain_equal(saved_nvec, list(action_nvec)):
        raise CheckpointError(
            f"checkpoint {path} is for observations of size {short_repr(saved_obs)} and actions "
            f"{short_repr(saved_nvec)}, this run has {obs_dim} and {list(action_nvec)} (the "
            "checkpoint's spaces.obs_dim and spaces.action_nvec)"
        )
    saved = set(state["policies"])
    if saved != set(modules):
        raise CheckpointError(
            f"checkpoint {path} holds policies {sorted(map(str, saved))} (its field 'policies'), "
            f"this run has {sorted(modules)}"
        )
    for tag, module in modules.items():
        for name in NETWORK_FIELDS:
            was = _field(state, f"config.policy.{tag}.model.{name}", Path(path))
            now = getattr(models[tag], name)
            if not plain_equal(was, now):
                raise CheckpointError(
                    f"checkpoint {path}: policy '{tag}' has a different network: "
                    f"config.policy.{tag}.model.{name} is {short_repr(was)} in the checkpoint, "
                    f"{now!r} in this run; set policy.{tag}.model.{name} back to resume, or start "
                    "a new run"
                )
        weights = _field(state, f"policies.{tag}.model", Path(path))
        if not isinstance(weights, Mapping):
            raise CheckpointError(
                f"checkpoint {path}: the field 'policies.{tag}.model' is {short_repr(weights)}, "
                "expected a state dict"
            )
        expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
        found = {k: _shape(v) for k, v in weights.items()}
        if expected != found:
            diff = sorted(set(expected.items()) ^ set(found.items()), key=repr)[:4]
            first = min(
                (k for k in {*expected, *found} if expected.get(k) != found.get(k)), key=str
            )
            raise CheckpointError(
                f"checkpoint {path}: policy '{tag}' has a different network "
                f"(mismatched parameters {diff}, first policies.{tag}.model.{first}); check "
                f"policy.{tag}.model.fc_dims"
            )


def plain_equal(a: Any, b: Any) -> bool:
    """``a == b`` for plain data, of the same types (``True`` is not ``1``; a list may be a
    tuple), never calling a tensor's ``==``."""
    if isinstance(b, list | tuple):
        return (
            isinstance(a, list | tuple)
            and len(a) == len(b)
            and all(plain_equal(x, y) for x, y in zip(a, b))
        )
    return type(a) is type(b) and a == b


def short_repr(value: Any) -> str:
    """``repr(value)``, a tensor as its shape and dtype, cut to 60 characters."""
    if isinstance(value, torch.Tensor):
        return f"a {tuple(value.shape)} {value.dtype} tensor"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _shape(value: Any) -> tuple | str:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__


def rank_states(
    state: dict, path: str | Path, world_size: int, generators: Mapping[str, torch.Tensor]
) -> list[dict]:
    """``state["rng"]`` (from ``load_checkpoint``) checked for a resume on ``world_size``
    processes: each process's entry, with its RNG states copied.

    ``generators`` maps the name of each generator the run restores (``torch``; ``cuda`` on a GPU)
    to this process's own state of it, which a saved state must match: a 1-D uint8 tensor of the
    same size. ``torch`` must be saved; the others only where the checkpoint has them.

    Raises ``CheckpointError``, before anything is restored, for a checkpoint of another number of
    processes (naming both) and for a state of another dtype, shape or size (naming the field,
    ``rng[1].torch``), which ``torch.set_rng_state`` would either refuse with a bare error or, for
    a 2-D tensor of the right byte count, accept.

    The copies matter: ``torch.set_rng_state`` crashes the process (a segmentation fault, torch
    2.13 on the CPU) on a tensor that starts at a storage offset, and checkpoints of multi-process
    runs written before this check hold each rank's state as a slice of the gathered tensor.
    """
    saved = state["rng"]
    if not isinstance(saved, Sequence) or not all(isinstance(e, Mapping) for e in saved):
        raise CheckpointError(
            f"checkpoint {path}: 'rng' is not a list of per-process states; the file is damaged "
            "or was not written by this version of the gpu-envs trainers"
        )
    if len(saved) != world_size:
        raise CheckpointError(_process_count_message(state, path, len(saved), world_size))
    copies = []
    for rank, entry in enumerate(saved):
        entry = dict(entry)
        for name, current in generators.items():
            field = f"rng[{rank}].{name}"
            if entry.get(name) is None:
                if name == "torch":
                    raise CheckpointError(f"checkpoint {path} has no field '{field}'")
                continue
            entry[name] = _rng_copy(entry[name], current, field, path)
        copies.append(entry)
    return copies


def _rng_copy(tensor: Any, current: torch.Tensor, field: str, path: str | Path) -> torch.Tensor:
    """A fresh contiguous copy of the saved RNG state ``tensor`` (at ``field``), checked against
    ``current``, the state of the same generator in this process."""
    expected = f"a 1-D torch.uint8 tensor of {current.numel()} bytes, as this torch's generator"
    if not isinstance(tensor, torch.Tensor):
        found = type(tensor).__name__
    elif tensor.dtype != torch.uint8 or tensor.dim() != 1 or tensor.numel() != current.numel():
        found = f"a {tuple(tensor.shape)} {tensor.dtype} tensor"
    else:
        return tensor.detach().to("cpu").clone(memory_format=torch.contiguous_format)
    raise CheckpointError(
        f"checkpoint {path}: the RNG state '{field}' is {found}, expected {expected}; the file "
        "is damaged or was written by another torch version"
    )


def _process_count_message(state: dict, path: str | Path, saved: int, world_size: int) -> str:
    trainer = state.get("config", {}).get("trainer", {})
    launched = ""
    if isinstance(trainer, Mapping) and {"devices", "num_nodes"} <= set(trainer):
        launched = (
            f" (its trainer.devices {trainer['devices']} x trainer.num_nodes "
            f"{trainer['num_nodes']})"
        )
    return (
        f"checkpoint {path} was written by a run on {saved} process(es){launched}, this run has "
        f"{world_size}: each process's envs, rollout and RNG states are saved, and the "
        "iteration count and learning-rate schedule depend on the number of processes. Resume "
        f"it on {saved} process(es) (the run's own config, as `--resume RUN` alone reads it, "
        "launches them), or start a new run from its weights with "
        f"policy.<tag>.model.model_ckpt_filepath={path} (the checkpoint's field 'rng' holds "
        "one state per process)"
    )


def load_model_weights(path: str | Path, tag: str) -> dict:
    """A policy's state dict from a trainer checkpoint or a bare ``state_dict`` file."""
    try:
        state = _torch_load(Path(path))
    except CheckpointError as error:
        raise CheckpointError(f"policy.{tag}.model.model_ckpt_filepath: {error}") from None
    if isinstance(state, dict) and state.get("format") == FORMAT:
        policies = _field(state, "policies", Path(path))
        if tag not in policies:
            raise CheckpointError(
                f"policy.{tag}.model.model_ckpt_filepath: {path} has no policy '{tag}' "
                f"(it has {sorted(policies)})"
            )
        return _field(state, f"policies.{tag}.model", Path(path))
    if not isinstance(state, dict):
        raise CheckpointError(f"policy.{tag}.model.model_ckpt_filepath: {path} holds no state dict")
    return state
