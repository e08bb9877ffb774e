"""One game of any engine env as a gymnasium ``Env`` (NumPy in and out): a drop-in for gymnasium's.

:class:`SingleEnv` runs a one-env batch of its ``vector_class`` on the CPU in float64 with autoreset
DISABLED. ``reset(seed=s)`` draws the start state as gymnasium's own env does, from the
``np_random`` that ``gymnasium.Env.reset`` seeds (the game's ``draw_start_state``), so the same seed
gives gymnasium's exact episode; the batch's counter RNG is not used. The game declares:

- ``draw_start_state(np_random, options) -> np.ndarray``: gymnasium's start-state draw;
- ``observation_of(state) -> np.ndarray``: gymnasium's observation of that state;
- a ``state`` property on the vector env ([num_envs, ...] view, assignable).

``options["reset_mask"]`` ([1] bool) is accepted as by the vector env: False leaves the game as it
is. ``unwrapped.state`` reads and assigns the float64 state like gymnasium's envs. Stepping after
the episode terminated without ``reset()`` does what gymnasium's envs do: it warns (gymnasium's
logger, once per episode) and steps the dynamics on, with the reward of
``reward_after_termination`` where the game sets one (CartPole: 0).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from gpu_envs.engine.validation import as_reset_mask, check_options, per_env_seeds


class SingleEnv(gym.Env):
    """Base of the single-game faces; subclasses set ``vector_class`` (``metadata``'s render modes
    and fps are its own)."""

    #: The batched env of one game: a :class:`KernelEnv` with a ``state`` and the static methods
    #: ``observation_of(state)`` and ``draw_start_state(np_random, options)``.
    vector_class: ClassVar[type[Any]]

    def reward_after_termination(self, reward: float) -> float:
        """The reward of a step taken after termination (gymnasium's CartPole overrides it)."""
        return reward

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        rendering = cls.vector_class.metadata
        cls.metadata = {key: rendering[key] for key in ("render_modes", "render_fps")}

    def __init__(self, render_mode: str | None = None, **params: Any):
        self._batch = self.vector_class(
            1,
            device="cpu",
            dtype=torch.float64,
            max_episode_steps=None,
            autoreset_mode="disabled",
            render_mode=render_mode,
            **params,
        )
        self.render_mode = render_mode
        #: False, "terminated" (the last step ended the episode) or "warned" (stepped on since)
        self._terminated: str | bool = False
        self.observation_space = self._batch.single_observation_space
        self.action_space = self._batch.single_action_space

    @property
    def state(self) -> np.ndarray:
        """The float64 state as a NumPy copy."""
        return self._batch.state[0].numpy().copy()

    @state.setter
    def state(self, value) -> None:
        self._batch.state = np.asarray(value, dtype=np.float64).reshape(self._batch.state.shape)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            per_env_seeds(seed, 1, torch.device("cpu"))  # a clear error for a bad seed
        options = check_options(options)
        if "reset_mask" in options and not bool(
            as_reset_mask(options.pop("reset_mask"), 1, self._batch.device)[0]
        ):
            return self.vector_class.observation_of(self.state), {}  # a False mask: no reset
        super().reset(seed=seed)
        self._terminated = False
        self._batch.reset(seed=0)
        start = self.vector_class.draw_start_state(self.np_random, options)
        self.state = start
        return self.vector_class.observation_of(start), {}

    def step(self, action):
        self._check_action(action)
        after_end = self._terminated
        if after_end:
            if self._terminated == "terminated":
                gym.logger.warn(
                    "step() called after this episode terminated, without reset(): the dynamics "
                    "go on as in gymnasium's env, but these steps are undefined behaviour; call "
                    "reset() when terminated is True"
                )
                self._terminated = "warned"
            self._batch.clear_finished()  # the dynamics go on, as in gymnasium's envs
        obs, reward, terminated, truncated, _ = self._batch.step(np.asarray([action]))
        reward = float(reward[0])
        if after_end:
            reward = self.reward_after_termination(reward)
        elif bool(terminated[0]):
            self._terminated = "terminated"
        return obs[0].numpy(), reward, bool(terminated[0]), bool(truncated[0]), {}

    def _check_action(self, action) -> None:
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            if not space.contains(action):
                allowed = "0 or 1" if space.n == 2 else f"an int in 0..{space.n - 1}"
                raise ValueError(f"action must be {allowed}, got {action!r}")
        elif np.shape(action) != space.shape:
            raise ValueError(f"action must have shape {space.shape}, got {action!r}")

    def render(self):
        """An RGB frame (H, W, 3 uint8) when ``render_mode="rgb_array"``."""
        frames = self._batch.render()
        return None if frames is None else frames[0]

    def close(self) -> None:
        self._batch.close()
