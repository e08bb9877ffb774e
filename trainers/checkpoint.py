"""Checkpoints: written atomically, read with ``torch.load(weights_only=True)``, checked on load.

A checkpoint is a dict of plain data and tensors::

    format, iteration, env_step, num_iterations (the LR schedule's position and length),
    counters {total_episodes, ...}, best_eval, config (the resolved run config),
    spaces {obs_dim, action_nvec},
    policies {<tag>: {model, optimizer}},
    sampler (the action sampler's state), rng [per rank: {torch, cuda}]

Writing goes to a temporary file in the same folder, fsync, then ``os.replace``: a run killed at any
moment leaves either the previous checkpoint or the new one, never a truncated file.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import torch

FORMAT = "gpu_envs.trainers.checkpoint/1"
_ITERATION_FILE = re.compile(r"^iteration_(\d+)\.pth\.tar$")


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read, or does not fit the run that loads it."""


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write ``state`` to ``path`` atomically (temp file + fsync + ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save({"format": FORMAT, **state}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: str | Path) -> dict:
    """Read a checkpoint written by ``save_checkpoint`` (tensors on the CPU)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises several types for damaged or foreign files
        raise CheckpointError(f"checkpoint {path} is corrupt or not a torch checkpoint: {error}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"checkpoint {path} is not a gpu-envs trainer checkpoint "
                              f"(format {found!r}, expected {FORMAT!r})")
    return state


def iteration_path(folder: str | Path, iteration: int) -> Path:
    """``<folder>/iteration_<N>.pth.tar``."""
    return Path(folder) / f"iteration_{iteration}.pth.tar"


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The ``iteration_<N>.pth.tar`` with the largest N in ``folder`` (None if there is none)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _ITERATION_FILE.match(p.name))]
    return max(found)[1] if found else None


def check_compatible(state: dict, path: str | Path, obs_dim: int, action_nvec, modules: dict) -> None:
    """Raise ``CheckpointError`` unless ``state`` holds the same policies and network shapes."""
    spaces = state.get("spaces", {})
    if spaces.get("obs_dim") != obs_dim or list(spaces.get("action_nvec", [])) != list(action_nvec):
        raise CheckpointError(f"checkpoint {path} is for observations of size {spaces.get('obs_dim')} and actions "
                              f"{spaces.get('action_nvec')}, this run has {obs_dim} and {list(action_nvec)}")
    saved = set(state.get("policies", {}))
    if saved != set(modules):
        raise CheckpointError(f"checkpoint {path} holds policies {sorted(saved)}, this run has {sorted(modules)}")
    for tag, module in modules.items():
        expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
        found = {k: tuple(v.shape) for k, v in state["policies"][tag]["model"].items()}
        if expected != found:
            diff = sorted(set(expected.items()) ^ set(found.items()))[:4]
            raise CheckpointError(f"checkpoint {path}: policy '{tag}' has a different network "
                                  f"(mismatched parameters {diff}); check policy.{tag}.model.fc_dims")


def load_model_weights(path: str | Path, tag: str) -> dict:
    """A policy's state dict from a trainer checkpoint or a bare ``state_dict`` file."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise CheckpointError(f"policy.{tag}.model.model_ckpt_filepath: cannot read {path}: {error}") from None
    if isinstance(state, dict) and state.get("format") == FORMAT:
        if tag not in state["policies"]:
            raise CheckpointError(f"policy.{tag}.model.model_ckpt_filepath: {path} has no policy '{tag}' "
                                  f"(it has {sorted(state['policies'])})")
        return state["policies"][tag]["model"]
    if not isinstance(state, dict):
        raise CheckpointError(f"policy.{tag}.model.model_ckpt_filepath: {path} holds no state dict")
    return state
