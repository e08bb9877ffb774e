"""What gymnasium's classic-control games (CartPole, Pendulum, Acrobot, MountainCar) share as
engine envs: a component-major state, a uniform start draw bounded by gymnasium's ``low``/``high``
reset options (a game may read other options), and gymnasium's own renderer.

A game subclasses :class:`ClassicControlVectorEnv` and declares its ``game``, ``logic``,
``state_size``, ``default_bounds``, ``default_max_episode_steps`` and ``renderer`` (the import path
of gymnasium's env class), and defines :meth:`~ClassicControlVectorEnv.make_spaces` and
:meth:`~ClassicControlVectorEnv.make_consts`; the base ``__init__`` takes the arguments every game
shares, calls both and builds the env. A game with arguments of its own (CartPole's
``sutton_barto_reward``, Pendulum's ``g``, MountainCar's ``goal_velocity``) sets them in its
``__init__`` before calling ``super().__init__``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.classic_control.utils import maybe_parse_reset_bounds
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_envs.engine import devices
from gpu_envs.engine.kernel_env import ComponentMajorState, KernelEnv, episode_buffers
from gpu_envs.engine.validation import check_max_episode_steps, check_reset_bounds


def reset_bounds(
    options: dict[str, Any] | None, default_low: float, default_high: float
) -> tuple[float, float]:
    """gymnasium's ``low``/``high`` reset options, checked as given (a string or NaN is refused)."""
    options = options or {}
    check_reset_bounds(options.get("low", default_low), options.get("high", default_high))
    return maybe_parse_reset_bounds(options, default_low, default_high)


class GameDefault:
    """The type of :data:`GAME_DEFAULT`."""

    def __repr__(self) -> str:
        return "GAME_DEFAULT"


#: ``max_episode_steps``' default: the game's ``default_max_episode_steps`` (gymnasium's
#: registration), so that None can keep its meaning "never truncate".
GAME_DEFAULT = GameDefault()


class ClassicControlVectorEnv(ComponentMajorState, KernelEnv, VectorEnv):
    """Base of the batched classic-control games (see the module); tensors in, tensors out.

    Args:
        num_envs: number of games.
        device: "cpu", "cuda", "cuda:N" or "auto" (CUDA when usable, else CPU).
        dtype: state precision, float64 (CPU default, bit-exact with gymnasium) or float32 (CUDA
            default). Observations are float32 either way; rewards have the state's dtype.
        max_episode_steps: truncation horizon (0 or None: never truncate); by default the game's
            ``default_max_episode_steps``.
        autoreset_mode: ``AutoresetMode`` NEXT_STEP (default), SAME_STEP or DISABLED.
        render_mode: None or "rgb_array" (``render()`` returns one frame per env).
        validate_actions: refuse actions outside the action space before each step (shapes and
            dtypes are always checked). On CUDA the value check costs one host synchronisation per
            step.
    """

    #: Number of state components (``state`` is [num_envs, state_size]).
    state_size: ClassVar[int]
    #: gymnasium's default bounds of the start draw (``low, high``; Pendulum's ``x_init, y_init``).
    default_bounds: ClassVar[tuple[float, float]]
    #: ``"module:Class"`` of gymnasium's env, whose renderer draws the frames.
    renderer: ClassVar[str]
    #: Attributes set on the renderer's env before each frame (e.g. Pendulum's ``last_u=None``).
    render_attributes: ClassVar[dict[str, Any]] = {}
    #: The truncation horizon of gymnasium's registration (``max_episode_steps``' default).
    default_max_episode_steps: ClassVar[int | None]
    component_major_buffers = ("state",)
    step_writes_every_output = True
    _consts: np.ndarray

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        dtype=None,
        max_episode_steps: int | None | GameDefault = GAME_DEFAULT,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        validate_actions: bool = True,
    ):
        super().__init__(
            num_envs,
            device,
            autoreset_mode=autoreset_mode,
            render_mode=render_mode,
            validate_actions=validate_actions,
        )
        self.dtype = devices.resolve_dtype(dtype, self.device)
        if isinstance(max_episode_steps, GameDefault):
            max_episode_steps = self.default_max_episode_steps
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self._bounds = np.array(self.default_bounds, dtype=np.float64)
        self.single_observation_space, self.single_action_space = self.make_spaces()
        self._consts = self.make_consts()
        self._build()

    def make_spaces(self) -> tuple[gym.Space, gym.Space]:
        """The game's single observation and action spaces."""
        raise NotImplementedError

    def make_consts(self) -> np.ndarray:
        """The ``consts`` array of the game's logic (see :meth:`constants`), in the state dtype
        where the logic wants it (:attr:`real_dtype` is set)."""
        raise NotImplementedError

    @property
    def real_dtype(self) -> np.dtype:
        """The NumPy dtype of the state (and rewards)."""
        return devices.torch_to_numpy_dtype(self.dtype)

    def buffer_layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The state component-major (``state[k, i]``), the step counter and the outputs."""
        n = self.num_envs
        obs_shape = self.single_observation_space.shape or ()
        return {
            "state": ((self.state_size, n), self.real_dtype),
            "elapsed": ((n,), np.dtype(np.int32)),
            **episode_buffers(n, obs_shape, self.real_dtype),
        }

    def constants(self) -> dict[str, np.ndarray]:
        return {"consts": self._consts, "reset_bounds": self._bounds}

    def settings(self) -> dict[str, Any]:
        return {"max_episode_steps": self.max_episode_steps, "autoreset_mode": self.autoreset_code}

    def apply_reset_options(self, options: dict[str, Any]) -> None:
        """``low``/``high``: the bounds of the uniform start draw (gymnasium's options). They hold
        for this reset and the autoresets after it, until the next ``reset()``."""
        unknown = set(options) - {"low", "high"}
        if unknown:
            raise ValueError(
                f"unknown reset option(s) {sorted(unknown)}: allowed low, high, reset_mask"
            )
        bounds = reset_bounds(options, *self.default_bounds)
        if bounds != tuple(self._bounds):
            self._bounds[:] = bounds
            self.update_constants()

    def render_frames(self) -> tuple[np.ndarray, ...]:
        """One frame per env by gymnasium's renderer of the game."""
        from gpu_envs.engine.rendering import gymnasium_frames

        return gymnasium_frames(
            self.renderer, self.state.double().cpu().numpy(), **self.render_attributes
        )
