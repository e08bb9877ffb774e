"""``gym.make_vec``'s entry points of the games: ``"gpu_envs.games.vector_entry:NAME"`` (a game's
:attr:`~gpu_envs.games.Game.vector_entry_point`) is the factory of the game ``NAME`` of
:data:`~gpu_envs.games.GAMES`.

Each builds the game's vector env (:attr:`~gpu_envs.games.Game.vector_env`) with ``gym.make_vec``'s
keywords and adds one of its own, ``array``: ``"torch"`` (the default) hands out the env's torch
tensors, ``"numpy"`` NumPy arrays for gymnasium's NumPy tools (CPU only; see
:mod:`gpu_envs.engine.numpy_face`): :func:`~gpu_envs.engine.numpy_face.with_array_face`, as every
engine env's class does, so a game's vector env need not be a
:class:`~gpu_envs.engine.kernel_env.KernelEnv` (Tag's rows are not).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gymnasium.vector import VectorEnv

from gpu_envs.engine.numpy_face import with_array_face
from gpu_envs.games import GAMES, Game, load


def make_vector_env(
    record: Game, num_envs: int = 1, *, array: str = "torch", **kwargs: Any
) -> VectorEnv:
    """The vector env of the game ``record`` with the ``array`` face (see the module)."""
    return with_array_face(load(record.vector_env), array, num_envs=num_envs, **kwargs)


def __getattr__(name: str) -> Callable[..., VectorEnv]:
    if name not in GAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} (no game {name!r})")
    return functools.partial(make_vector_env, GAMES[name])
