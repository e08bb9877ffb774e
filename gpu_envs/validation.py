"""Checks on user input that run before any kernel, with errors that name the problem."""

from __future__ import annotations

from typing import Sequence

import numba
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_envs.kernels import autoreset

_INTEGER_DTYPES = frozenset({torch.uint8, torch.uint16, torch.uint32, torch.uint64,
                             torch.int8, torch.int16, torch.int32, torch.int64})

#: The kernels' integer code of each autoreset mode.
AUTORESET_CODES = {
    AutoresetMode.NEXT_STEP: autoreset.NEXT_STEP,
    AutoresetMode.SAME_STEP: autoreset.SAME_STEP,
    AutoresetMode.DISABLED: autoreset.DISABLED,
}


def as_action_tensor(actions, shape: tuple[int, ...], device: torch.device,
                     upper: int | Sequence[int] | torch.Tensor, name: str = "actions",
                     check_range: bool = True) -> torch.Tensor:
    """Validate integer actions of ``shape`` in ``[0, upper]`` and return them as int64 on ``device``.

    ``upper`` bounds every entry, or per entry of the last axis when it is a sequence.
    ``check_range=False`` leaves the range to the caller (a kernel that checks it before stepping).
    """
    if isinstance(actions, torch.Tensor):
        tensor = actions
    else:
        array = np.asarray(actions)
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
            raise TypeError(f"{name} must be an integer array or tensor, got {type(actions).__name__}")
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    if tensor.dtype not in _INTEGER_DTYPES:
        detail = " (it contains NaN)" if tensor.is_floating_point() and bool(tensor.isnan().any()) else ""
        raise TypeError(f"{name} must have an integer dtype, got {tensor.dtype}{detail}")
    if tensor.shape != shape:
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(tensor.shape)}")
    if check_range:
        _check_range(tensor, upper, name)
    if tensor.dtype is torch.int64 and tensor.device == device:
        return tensor
    return tensor.to(device=device, dtype=torch.int64)


def _check_range(tensor: torch.Tensor, upper, name: str) -> None:
    if tensor.device.type == "cpu":
        # One compiled, vectorised pass without temporaries; the failing entry is looked up only on error.
        bounds = np.asarray(upper, dtype=np.int64).reshape(-1)
        if _any_out_of_range(tensor.numpy().reshape(-1, bounds.size), bounds):
            raise_out_of_range(tensor, torch.as_tensor(upper), name)
    else:
        bad = (tensor < 0) | (tensor > torch.as_tensor(upper, device=tensor.device))
        if bool(bad.any()):
            raise_out_of_range(tensor, torch.as_tensor(upper, device=tensor.device), name)


@numba.njit(cache=True)
def _any_out_of_range(values, upper):
    """Whether any ``values[r, h]`` lies outside ``[0, upper[h]]``."""
    bad = False
    for head in range(values.shape[1]):
        high = upper[head]
        for row in range(values.shape[0]):
            bad |= (values[row, head] < 0) | (values[row, head] > high)
    return bad


def raise_out_of_range(tensor: torch.Tensor, upper: torch.Tensor, name: str):
    """Raise a ValueError naming the first entry of ``tensor`` outside ``[0, upper]``."""
    where = tuple(int(v) for v in ((tensor < 0) | (tensor > upper)).nonzero()[0].tolist())
    raise ValueError(f"{name}{list(where)} = {int(tensor[where])} is out of range: allowed 0..{_describe(upper)}")


def _describe(upper) -> str:
    if isinstance(upper, torch.Tensor):
        upper = upper.tolist()
    return str(upper)


def parse_autoreset_mode(mode) -> AutoresetMode:
    """Accept an ``AutoresetMode`` or its name/value ("next_step", "same_step", "disabled")."""
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str):
        for member in AutoresetMode:
            if mode.lower() in (member.value.lower(), member.name.lower()):
                return member
    raise ValueError(
        f"autoreset_mode must be one of {[m.name for m in AutoresetMode]}, got {mode!r}"
    )


def as_reset_mask(mask, num_envs: int, device: torch.device) -> torch.Tensor:
    """A bool reset mask of shape [num_envs] on ``device``."""
    tensor = mask if isinstance(mask, torch.Tensor) else torch.from_numpy(np.asarray(mask))
    if tensor.dtype != torch.bool:
        raise TypeError(f"options['reset_mask'] must be boolean, got {tensor.dtype}")
    if tuple(tensor.shape) != (num_envs,):
        raise ValueError(f"options['reset_mask'] must have shape ({num_envs},), got {tuple(tensor.shape)}")
    return tensor.to(device)


def check_positive_int(value, name: str) -> int:
    """An int > 0 or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be an int > 0, got {value!r}")
    return int(value)


def per_env_seeds(seed, num_envs: int, device: torch.device, noun: str = "env") -> torch.Tensor:
    """[num_envs] int64 seeds: ``seed + i`` for an int ``seed``, or one int >= 0 per ``noun`` from a sequence."""
    if isinstance(seed, (list, tuple, np.ndarray, torch.Tensor)):
        values = [int(s) for s in (seed.tolist() if hasattr(seed, "tolist") else seed)]
        if len(values) != num_envs or any(s < 0 for s in values):
            raise ValueError(f"seed sequence must hold {num_envs} ints >= 0 (one per {noun}), got {seed!r}")
        return torch.tensor(values, dtype=torch.int64, device=device)
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed) + torch.arange(num_envs, dtype=torch.int64, device=device)
    raise ValueError(f"seed must be an int >= 0, a sequence of ints or None, got {seed!r}")


def check_all_reset(needs_reset: torch.Tensor, noun: str) -> None:
    """With autoreset DISABLED, refuse to step while any ``noun`` (env, game) ended without a reset."""
    if bool(needs_reset.any()):
        ids = needs_reset.nonzero().flatten()[:8].tolist()
        raise RuntimeError(
            f"{noun}(s) {ids} finished and were not reset: with autoreset_mode=DISABLED call "
            "reset(options={'reset_mask': mask}) for them before stepping"
        )
