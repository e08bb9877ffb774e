"""Checks on user input that run before any kernel, with errors that name the problem.

Value checks of tensors on a CUDA device run there and leave a flag; reading it back is a host
synchronisation. Inside :func:`one_read` the flags of every check on that block's device are read
together, once, when the block ends (the engine's step: its action check and the envs' state
check cost one read between them).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import NoReturn

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_envs.kernels import autoreset
from gpu_envs.kernels.action_check import any_out_of_range

_WIDE_UNSIGNED = frozenset({torch.uint16, torch.uint32, torch.uint64})
_INTEGER_DTYPES = frozenset(
    {
        torch.uint8,
        torch.uint16,
        torch.uint32,
        torch.uint64,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
    }
)

#: The kernels' integer code of each autoreset mode.
AUTORESET_CODES = {
    AutoresetMode.NEXT_STEP: autoreset.NEXT_STEP,
    AutoresetMode.SAME_STEP: autoreset.SAME_STEP,
    AutoresetMode.DISABLED: autoreset.DISABLED,
}


#: Seeds are int64 tensors that the kernels view as uint64: every seed lies in [0, MAX_SEED].
MAX_SEED = 2**63 - 1
#: CartPole's step counter is int32.
MAX_EPISODE_STEPS = 2**31 - 1
#: CartPole's reset bounds: magnitudes of low and high up to this keep one step's squared angular
#: velocity (and so every state and observation) finite in float32.
RESET_BOUND_LIMIT = 2.0**60


@dataclass
class _PendingChecks:
    device: torch.device
    flags: list[torch.Tensor] = field(default_factory=list)
    errors: list[Callable[[], NoReturn]] = field(default_factory=list)


_PENDING: ContextVar[_PendingChecks | None] = ContextVar("gpu_envs_pending_checks", default=None)


@contextlib.contextmanager
def one_read(device: torch.device) -> Iterator[None]:
    """Defer the value checks of tensors on ``device`` made inside the block: their flags stay on
    the device and are read back together when the block ends (one device-to-host transfer), and
    the first failed check then raises its error. Tensors on ``device`` are checked with torch ops
    there even when ``device`` is the CPU (the simulated CUDA device), as on a GPU."""
    pending = _PendingChecks(device)
    token = _PENDING.set(pending)
    try:
        yield
    finally:
        _PENDING.reset(token)
    if pending.flags:
        failed = torch.stack(pending.flags).tolist()  # the one read
        for bad, raise_error in zip(failed, pending.errors):
            if bad:
                raise_error()


def _on_device(tensor: torch.Tensor) -> bool:
    """Whether ``tensor``'s values are checked by torch ops where it lives, leaving a flag: on a
    CUDA device, or on the device of an open :func:`one_read`."""
    pending = _PENDING.get()
    return tensor.device.type == "cuda" or (pending is not None and tensor.device == pending.device)


def _check(flag: torch.Tensor, raise_error: Callable[[], NoReturn]) -> None:
    """Call ``raise_error`` if the 0-dim bool ``flag`` is set: when an open :func:`one_read` on the
    flag's device reads it, else now."""
    pending = _PENDING.get()
    if pending is not None and flag.device == pending.device:
        pending.flags.append(flag)
        pending.errors.append(raise_error)
    elif bool(flag):
        raise_error()


def _outside(rows: torch.Tensor, low: list, high: list) -> torch.Tensor:
    """[R, K] bool: ``rows[r, k]`` outside ``[low[k], high[k]]`` (NaN is outside). The bounds are
    Python numbers compared as scalars, so none is copied to the device."""
    if len(set(low)) == 1 and len(set(high)) == 1:
        return ~((rows >= low[0]) & (rows <= high[0]))
    outside = torch.empty(rows.shape, dtype=torch.bool, device=rows.device)
    for k, (lo, hi) in enumerate(zip(low, high)):
        outside[:, k] = ~((rows[:, k] >= lo) & (rows[:, k] <= hi))
    return outside


def as_bool(value, name: str) -> bool:
    """``value`` if it is a bool (Python or NumPy); a TypeError naming ``name`` otherwise (no
    truthiness: the string "False" is not False)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool (True or False), got {value!r}")


def as_finite_real(value, name: str) -> float:
    """``value`` as a float if it is a finite real number (not a bool); a ValueError naming
    ``name`` otherwise."""
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(value)
    ):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    return float(value)


def is_int(value) -> bool:
    """A Python or NumPy int, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def as_tensor(value, name: str, kind: str) -> torch.Tensor:
    """``value`` as a tensor (zero-copy where possible) with a TypeError or ValueError naming
    ``name``.

    Tensors must be dense and on the CPU or a CUDA device (not ``meta`` or another backend) and are
    detached; arrays (of either byte order), lists and scalars must be numeric. ``kind`` describes
    what is expected (e.g. "an integer array").
    """
    if isinstance(value, torch.Tensor):
        if not (value.is_cpu or value.is_cuda) or value.layout is not torch.strided:
            raise ValueError(
                f"{name} must be a dense tensor on the CPU or a CUDA device, got a {value.layout} "
                f"tensor on {value.device}"
            )
        return value.detach() if value.requires_grad else value  # no gradient into the env
    if value is None:
        raise TypeError(f"{name} must be {kind}, got None")
    array = np.asarray(value)
    if not array.dtype.isnative:  # big-endian data: the same values in the machine's order
        array = array.astype(array.dtype.newbyteorder("="))
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(f"{name} must be {kind}, got {type(value).__name__} of dtype {array.dtype}")
    if not array.flags.writeable:  # (torch warns on a read-only array; ours is only read)
        array = array.copy()
    return torch.from_numpy(np.ascontiguousarray(array))


def check_action_layout(
    actions, shape: tuple[int, ...], device: torch.device, name: str = "actions"
) -> torch.Tensor:
    """Integer ``actions`` of ``shape`` as int64 on ``device``: dtype, shape and device checks only
    (cheap).

    The path for envs that leave the range to the kernel (``validate_actions=False``): a tensor of
    the wrong length or dtype never reaches a kernel.
    """
    return _to_int64(_integer_layout(actions, shape, name), device)


def as_action_tensor(
    actions,
    shape: tuple[int, ...],
    device: torch.device,
    upper: int | Sequence[int] | torch.Tensor,
    name: str = "actions",
    check_range: bool = True,
) -> torch.Tensor:
    """Validate integer actions of ``shape`` in ``[0, upper]`` and return them as int64 on
    ``device``.

    ``upper`` bounds every entry, or per entry of the last axis when it is a sequence.
    ``check_range=False`` leaves the range to the caller (a kernel that checks it before stepping);
    dtype and shape are checked either way.
    """
    tensor = _integer_layout(actions, shape, name)
    if check_range:
        _check_range(tensor, upper, name)
    return _to_int64(tensor, device)


def _integer_layout(actions, shape: tuple[int, ...], name: str) -> torch.Tensor:
    tensor = as_tensor(actions, name, "an integer array or tensor")
    if tensor.dtype not in _INTEGER_DTYPES:
        detail = (
            " (it contains NaN)"
            if tensor.is_floating_point() and bool(tensor.isnan().any())
            else ""
        )
        raise TypeError(f"{name} must have an integer dtype, got {tensor.dtype}{detail}")
    if tensor.shape != shape:
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(tensor.shape)}")
    return tensor


def _to_int64(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    if tensor.dtype is torch.int64 and tensor.device == device:
        return tensor
    return tensor.to(device=device, dtype=torch.int64)


def check_box_action_layout(
    actions,
    shape: tuple[int, ...],
    device: torch.device,
    name: str = "actions",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Continuous ``actions`` of ``shape`` as ``dtype`` on ``device``: dtype, shape and device
    checks only."""
    return _float_layout(actions, shape, name).to(device=device, dtype=dtype)


def as_box_action_tensor(
    actions,
    shape: tuple[int, ...],
    device: torch.device,
    name: str = "actions",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Validate continuous (Box) actions and return them as ``dtype`` on ``device``.

    ``actions`` must be a float array or tensor of ``shape`` whose entries are finite; a TypeError
    or ValueError names the first offending entry otherwise. Values outside the action space pass:
    the step clips them, as gymnasium's Pendulum and MountainCarContinuous do (``np.clip``).
    """
    tensor = _float_layout(actions, shape, name)

    def raise_error() -> NoReturn:
        values = tensor.detach().cpu().double()
        where = tuple(int(v) for v in (~torch.isfinite(values)).nonzero()[0].tolist())
        raise ValueError(f"{name}{list(where)} = {float(values[where])} must be finite")

    _check(~torch.isfinite(tensor).all(), raise_error)
    return tensor.to(device=device, dtype=dtype)


def _float_layout(actions, shape: tuple[int, ...], name: str) -> torch.Tensor:
    tensor = as_tensor(actions, name, "a float array or tensor")
    if not tensor.is_floating_point():
        raise TypeError(
            f"{name} must have a floating dtype (continuous actions), got {tensor.dtype}"
        )
    if tensor.shape != shape:
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(tensor.shape)}")
    return tensor


def _check_range(tensor: torch.Tensor, upper, name: str) -> None:
    bounds = np.asarray(upper, dtype=np.int64).reshape(-1)
    if _on_device(tensor) and tensor.dtype not in _WIDE_UNSIGNED:  # torch cannot compare those
        rows = tensor.reshape(-1, bounds.size).to(torch.int64)
        flag = _outside(rows, [0] * bounds.size, bounds.tolist()).any()
        _check(flag, lambda: raise_out_of_range(tensor, torch.as_tensor(upper), name))
    elif any_out_of_range(tensor.cpu().numpy().reshape(-1, bounds.size), bounds):
        # One compiled, vectorised pass without temporaries; the failing entry is looked up only on
        # error.
        raise_out_of_range(tensor, torch.as_tensor(upper), name)


def raise_out_of_range(tensor: torch.Tensor, upper: torch.Tensor, name: str) -> NoReturn:
    """Raise a ValueError naming the first entry of ``tensor`` outside ``[0, upper]``."""
    values = tensor.detach().cpu().numpy()  # NumPy compares every integer dtype, uint64 included
    high = upper.detach().cpu().numpy() if isinstance(upper, torch.Tensor) else np.asarray(upper)
    where = tuple(int(v) for v in np.argwhere((values < 0) | (values > high))[0])
    raise ValueError(
        f"{name}{list(where)} = {int(values[where])} is out of range: allowed 0..{_describe(upper)}"
    )


def _describe(upper) -> str:
    if isinstance(upper, (torch.Tensor, np.ndarray)):
        upper = upper.tolist()
    return str(upper)


_CPU = torch.device("cpu")
# (bound once: the CPU step's layout check runs every step)
_INT64, _STRIDED = torch.int64, torch.strided


class ActionCheck:
    """The checks of one env's actions, prepared once from its action space and action shape.

    :meth:`tensor` gives the actions as a tensor on the env's device (``KernelEnv.check_actions``);
    :meth:`kernel_array` gives them as the C-contiguous NumPy array of the kernel's action dtype
    that a CPU kernel reads, converted once and range-checked in place. Both raise the same errors:
    layout (type, dtype, shape) always, values when ``validate``.
    """

    def __init__(self, space: gym.Space, shape: tuple[int, ...], device: torch.device):
        self.space, self.shape, self.device = space, tuple(shape), device
        self.box = isinstance(space, gym.spaces.Box)
        if isinstance(space, gym.spaces.Discrete):
            self.upper: int | list[int] | None = int(space.n) - 1
        elif isinstance(space, gym.spaces.MultiDiscrete):
            self.upper = [int(v) - 1 for v in space.nvec]
        else:
            self.upper = None
        self._bounds = np.asarray(-1 if self.upper is None else self.upper, np.int64).reshape(-1)
        self._rows = (-1, self._bounds.size)  # the actions as rows of one bound per entry

    def tensor(self, actions, validate: bool) -> torch.Tensor:
        """The actions as a tensor on the device (float32 for a Box space, else int64)."""
        if isinstance(self.space, gym.spaces.Box):
            if validate:
                return as_box_action_tensor(actions, self.shape, self.device)
            return check_box_action_layout(actions, self.shape, self.device)
        if not validate:
            return check_action_layout(actions, self.shape, self.device)
        return as_action_tensor(actions, self.shape, self.device, self._checked_upper())

    def kernel_array(self, actions, validate: bool) -> np.ndarray:
        """The actions as the C-contiguous NumPy array (on the CPU) that a CPU kernel reads."""
        if self.box:
            return self.tensor(actions, validate).contiguous().numpy()
        upper = self._checked_upper() if validate else None
        array, given = self._as_is(actions), None
        if array is None:
            given = _integer_layout(actions, self.shape, "actions")
            array = _to_int64(given, _CPU).contiguous().numpy()
        if validate and any_out_of_range(array.reshape(self._rows), self._bounds):
            shown = torch.from_numpy(array) if given is None else given
            raise_out_of_range(shown, torch.as_tensor(upper), "actions")
        return array

    def _fits(self, actions) -> bool:
        """``actions`` is the common case the kernel reads as it is: a C-contiguous int64 CPU
        tensor, or a writable aligned C-contiguous int64 NumPy array, of the expected shape."""
        if type(actions) is torch.Tensor:
            return self._tensor_fits(actions)
        if type(actions) is np.ndarray:
            flags = actions.flags
            return (
                actions.dtype == np.int64
                and actions.shape == self.shape
                and flags.c_contiguous
                and flags.writeable
                and flags.aligned
            )
        return False

    def _tensor_fits(self, actions: torch.Tensor) -> bool:
        return (
            actions.dtype is _INT64
            and actions.is_cpu
            and actions.layout is _STRIDED  # (before is_contiguous, which sparse tensors lack)
            and actions.shape == self.shape
            and actions.is_contiguous()
        )

    def _as_is(self, actions) -> np.ndarray | None:
        """The common case without conversion, as the array the kernel reads (None for anything
        else)."""
        if not self._fits(actions):
            return None
        return actions.numpy() if type(actions) is torch.Tensor else actions

    def in_place_source(self, actions) -> int | np.ndarray | None:
        """What the CPU step loop reads in place for the common case: a tensor's address (no
        NumPy view made), an array itself; None for anything else (convert and check it)."""
        if type(actions) is torch.Tensor:
            return actions.data_ptr() if self._tensor_fits(actions) else None
        return actions if self._fits(actions) else None

    def _checked_upper(self) -> int | list[int]:
        if self.upper is None:
            raise NotImplementedError(f"no action check for {self.space}; override check_actions")
        return self.upper


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
    name = "options['reset_mask']"
    tensor = as_tensor(mask, name, f"a bool array or tensor of shape ({num_envs},)")
    if tensor.dtype != torch.bool:
        raise TypeError(f"{name} must be boolean, got {tensor.dtype}")
    if tuple(tensor.shape) != (num_envs,):
        raise ValueError(f"{name} must have shape ({num_envs},), got {tuple(tensor.shape)}")
    return tensor.to(device)


def check_positive_int(value, name: str) -> int:
    """An int > 0 or a ValueError naming ``name``."""
    if not is_int(value) or value <= 0:
        raise ValueError(f"{name} must be an int > 0, got {value!r}")
    return int(value)


def check_max_episode_steps(value, name: str = "max_episode_steps") -> int:
    """The truncation horizon as an int (0: never truncate), from an int in [0, 2**31 - 1] or None.

    Anything else (a float such as 1.5 or NaN, a string, a bool, a larger int) is a ValueError: a
    float is never rounded to an int behind the caller's back.
    """
    if value is None:
        return 0
    if not is_int(value) or not 0 <= value <= MAX_EPISODE_STEPS:
        raise ValueError(
            f"{name} must be an int in [0, {MAX_EPISODE_STEPS}] (0 or None: never truncate; the "
            f"step counter is int32), got {value!r}"
        )
    return int(value)


def check_options(options) -> dict:
    """``options`` of a ``reset`` as a new dict: a mapping or None, else a TypeError."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(
            f"options must be a dict of reset options (or None), got {type(options).__name__} "
            f"{options!r}"
        )
    return dict(options)


def check_reset_bounds(low, high) -> tuple[float, float]:
    """CartPole's reset bounds ``options['low']``, ``options['high']`` as floats, or a ValueError
    naming the rule.

    Both must be real numbers with ``-RESET_BOUND_LIMIT <= low <= high <= RESET_BOUND_LIMIT``
    (2**60: beyond it one step's squared angular velocity overflows float32; NaN and inf are
    refused).
    """
    for key, value in (("low", low), ("high", high)):
        if not (
            _is_number(value) and -RESET_BOUND_LIMIT <= value <= RESET_BOUND_LIMIT
        ):  # NaN fails too
            raise ValueError(
                f"options['{key}'] must be a finite number in [-2**60, 2**60], got {value!r}"
            )
    if low > high:
        raise ValueError(
            f"options['low'] must be <= options['high'], got low={low!r}, high={high!r}"
        )
    return float(low), float(high)


def per_env_seeds(seed, num_envs: int, device: torch.device, noun: str = "env") -> torch.Tensor:
    """[num_envs] int64 seeds: ``seed + i`` for an int ``seed``, or one int per ``noun`` from a
    sequence.

    Every seed must lie in [0, MAX_SEED = 2**63 - 1] (the kernels view them as uint64 words of int64
    tensors), so an int ``seed`` must satisfy ``seed + num_envs - 1 <= MAX_SEED``.
    """
    if isinstance(seed, (list, tuple, np.ndarray, torch.Tensor)):
        values = seed.tolist() if hasattr(seed, "tolist") else list(seed)
        if len(values) != num_envs or not all(is_int(s) and 0 <= s <= MAX_SEED for s in values):
            raise ValueError(
                f"seed sequence must hold {num_envs} ints in [0, 2**63 - 1] (one per {noun}), got "
                f"{seed!r}"
            )
        return torch.tensor(values, dtype=torch.int64, device=device)
    if is_int(seed) and 0 <= seed <= MAX_SEED - (num_envs - 1):
        return int(seed) + torch.arange(num_envs, dtype=torch.int64, device=device)
    raise ValueError(
        f"seed must be an int in [0, 2**63 - {num_envs}] ({noun} i gets seed + i, an int64), a "
        f"sequence of {num_envs} ints or None, got {seed!r}"
    )


def check_all_reset(needs_reset: torch.Tensor, noun: str) -> None:
    """With autoreset DISABLED, refuse to step while any ``noun`` (env, game) ended without a
    reset (inside :func:`one_read`, when it ends)."""

    def raise_error() -> NoReturn:
        ids = needs_reset.nonzero().flatten()[:8].tolist()
        raise RuntimeError(
            f"{noun}(s) {ids} finished and were not reset: with autoreset_mode=DISABLED call "
            "reset(options={'reset_mask': mask}) for them before stepping"
        )

    _check(needs_reset.any(), raise_error)
