"""The NumPy face of a torch vector env on the CPU: ``gym.make_vec(..., array="numpy")``.

gymnasium's own vector wrappers (``NormalizeObservation``, ``NormalizeReward``,
``RecordEpisodeStatistics``, ``FlattenObservation``, ``DtypeObservation`` ...) and loops written
for gymnasium's NumPy envs (CleanRL's ``ppo.py``) read NumPy arrays. :class:`NumpyArrays` is
gymnasium's ``ArrayConversion`` from torch to NumPy, with a CPU fast path: a step's outputs become
NumPy views of the step's own tensors (``Tensor.numpy()``, no copy), ``info``'s tensors likewise,
and NumPy actions reach the env as tensor views of their memory (no copy either). gymnasium's
generic conversion gives the same arrays at several times the cost of a small batch's step.

Every engine env takes the face as a keyword of its class (:class:`ArrayFaces`, the metaclass of
:class:`~gpu_envs.engine.kernel_env.KernelEnv`), so a game registered with its class as
``vector_entry_point`` (``docs/write-an-env.md``) takes ``array`` as the bundled games do.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv
from gymnasium.wrappers.vector import ArrayConversion

#: The values of ``gym.make_vec``'s ``array`` keyword: the arrays the env hands out and takes.
ARRAYS = ("torch", "numpy")


class NumpyArrays(ArrayConversion):
    """``env`` (a vector env of CPU torch tensors) with NumPy arrays in and out.

    Observations, rewards, terminations, truncations and ``info``'s tensors come out as NumPy
    arrays sharing memory with the env's fresh output tensors of that step; actions may be NumPy
    arrays (or anything the env takes). Spaces, ``metadata`` (``autoreset_mode``), ``render`` and
    ``unwrapped`` are the env's.
    """

    def __init__(self, env: VectorEnv):
        if not isinstance(env, VectorEnv):
            raise TypeError(
                f"array='numpy' is the NumPy face of a gymnasium VectorEnv, and "
                f"{type(env).__name__} is not one: leave array out (torch tensors)"
            )
        device = getattr(env.unwrapped, "device", torch.device("cpu"))
        if torch.device(device).type != "cpu":
            raise ValueError(
                f"array='numpy' hands out host arrays, but this env lives on {device}: build it "
                "with device='cpu', or keep array='torch' on a GPU (tensors stay on the device, "
                "with no host copy per step)"
            )
        super().__init__(env, env_xp=torch, target_xp=np)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, rewards, terminated, truncated, info = self.env.step(_tensor_view(actions))
        return obs.numpy(), rewards.numpy(), terminated.numpy(), truncated.numpy(), _numpy(info)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """The env's reset (``options`` passed as given: the env takes NumPy masks and numbers)."""
        obs, info = self.env.reset(seed=seed, options=options)
        return obs.numpy(), _numpy(info)


def _tensor_view(actions: Any) -> Any:
    """A plain C-contiguous, writable NumPy array of numbers as a tensor sharing its memory (the
    engine's CPU step reads a tensor's memory in place, its fastest input); anything else as it
    is (the env checks it)."""
    if (
        type(actions) is np.ndarray
        and actions.dtype.kind in "biuf"
        and actions.dtype.isnative
        and actions.flags.c_contiguous
        and actions.flags.writeable
    ):
        return torch.from_numpy(actions)
    return actions


def _numpy(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` with its tensors (also in nested dicts) as NumPy arrays."""
    return {
        key: value.numpy()
        if isinstance(value, torch.Tensor)
        else _numpy(value)
        if isinstance(value, dict)
        else value
        for key, value in info.items()
    }


def check_array(array: str) -> str:
    """``array`` if it is one of :data:`ARRAYS`, else a ``ValueError`` naming them."""
    if not isinstance(array, str) or array not in ARRAYS:
        raise ValueError(
            f"array must be one of {ARRAYS} (the arrays the env hands out), got {array!r}"
        )
    return array


def numpy_face(env: VectorEnv) -> NumpyArrays:
    """``NumpyArrays(env)``; ``env`` is closed when it cannot have one (not on the CPU, not a
    ``VectorEnv``)."""
    try:
        return NumpyArrays(env)
    except (TypeError, ValueError):
        env.close()
        raise


def with_array_face(make_env: Callable[..., Any], array: str, /, *args: Any, **kwargs: Any) -> Any:
    """``make_env(*args, **kwargs)`` with the ``array`` face: the env itself for ``"torch"``,
    :func:`numpy_face` of it for ``"numpy"``; another ``array`` is refused before an env is
    built."""
    array = check_array(array)
    env = make_env(*args, **kwargs)
    return numpy_face(env) if array == "numpy" else env


class ArrayFaces(type):
    """Metaclass of env classes whose call takes the ``array`` keyword of ``gym.make_vec``
    (:data:`ARRAYS`; see :func:`with_array_face`): ``Env(num_envs, array="numpy")`` is
    ``NumpyArrays(Env(num_envs))``. Copies (pickle, ``copy.deepcopy``) build no instance
    through it."""

    def __call__(cls, *args: Any, array: str = "torch", **kwargs: Any) -> Any:
        return with_array_face(super().__call__, array, *args, **kwargs)

    @property
    def __signature__(cls) -> inspect.Signature:
        """The class's ``__init__`` parameters and ``array`` (what ``help`` and
        ``inspect.signature`` show, rather than this ``__call__``'s ``*args, **kwargs``)."""
        init = inspect.signature(cls.__init__)  # type: ignore[misc]
        parameters = list(init.parameters.values())[1:]
        array = inspect.Parameter("array", inspect.Parameter.KEYWORD_ONLY, default="torch")
        position = next(
            (i for i, p in enumerate(parameters) if p.kind is inspect.Parameter.VAR_KEYWORD),
            len(parameters),
        )
        parameters.insert(position, array)
        return inspect.Signature(parameters)
