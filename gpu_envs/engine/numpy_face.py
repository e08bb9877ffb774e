"""The NumPy face of a torch vector env on the CPU: ``gym.make_vec(..., array="numpy")``.

gymnasium's own vector wrappers (``NormalizeObservation``, ``NormalizeReward``,
``RecordEpisodeStatistics``, ``FlattenObservation``, ``DtypeObservation`` ...) and loops written
for gymnasium's NumPy envs (CleanRL's ``ppo.py``) read NumPy arrays. :class:`NumpyArrays` is
gymnasium's ``ArrayConversion`` from torch to NumPy, with a CPU fast path: a step's outputs become
NumPy views of the step's own tensors (``Tensor.numpy()``, no copy), ``info``'s tensors likewise,
and NumPy actions reach the env as tensor views of their memory (no copy either). gymnasium's
generic conversion gives the same arrays at several times the cost of a small batch's step.
"""

from __future__ import annotations

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
    """``NumpyArrays(env)``; ``env`` is closed when it cannot have one (not on the CPU)."""
    try:
        return NumpyArrays(env)
    except ValueError:
        env.close()
        raise
