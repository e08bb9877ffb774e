"""One game of any engine env as a gymnasium ``Env`` (NumPy in and out): a drop-in for gymnasium's.

:class:`SingleEnv` keeps a one-env batch of its ``vector_class`` on the CPU in float64 with
autoreset DISABLED, and steps it with the game's serial CPU step loop called directly on the
batch's NumPy views (no torch call, no thread pool, no per-step conversion: the action is written
into the batch's action buffer and an integer action's range is checked inside the compiled loop,
which steps nothing when it is out of range). ``reset(seed=s)`` draws the start state as
gymnasium's own env does, from the ``np_random`` that ``gymnasium.Env.reset`` seeds (the game's
``draw_start_state``), so the same seed gives gymnasium's exact episode; the batch's counter RNG
is not used. The game declares:

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
import numba
import numpy as np
import torch

from gpu_envs.engine.validation import as_reset_mask, check_options, per_env_seeds

#: Integer types of a Discrete action written into the action buffer as they are.
_PLAIN_INTEGERS = (int, np.int64)
#: What a SingleEnv drops when copied or pickled: views of its batch's memory and compiled code,
#: bound again in the copy.
_BOUND = (
    "_state",
    "_loop",
    "_loop_args",
    "_reset_loop",
    "_reset_args",
    "_actions",
    "_obs",
    "_rewards",
    "_terminations",
    "_truncations",
)


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
        # The batch's buffers are the step's outputs, never replaced (the step copies the obs).
        self._batch.copy_outputs = False
        self.render_mode = render_mode
        #: False, "terminated" (the last step ended the episode) or "warned" (stepped on since)
        self._terminated: str | bool = False
        self.observation_space = self._batch.single_observation_space
        self.action_space = self._batch.single_action_space
        space = self.action_space
        self._discrete = isinstance(space, gym.spaces.Discrete)
        #: the largest action of a Discrete space (0 for a Box)
        self._largest = int(space.n) - 1 if isinstance(space, gym.spaces.Discrete) else 0
        # the actions written into the action buffer unchecked: plain ints of a Discrete space,
        # arrays of a Box space's shape (the games' step gives them as float32)
        self._written_as_is = _PLAIN_INTEGERS if self._discrete else ()
        self._box_shape = None if self._discrete else space.shape
        self._state = self._batch.state.numpy()  # [1, components], the batch's memory
        self._loop_args: tuple = ()
        self._unbind(_before_reset)

    @property
    def state(self) -> np.ndarray:
        """The float64 state as a NumPy copy."""
        return self._state[0].copy()

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
        if self._loop is _before_reset:
            self._batch.reset(seed=0)  # compiles (or loads) the game's loops
            self._bind()
        self._terminated = False
        self._reset_loop(*self._reset_args)  # the episode's counters (and the batch's own start)
        start = self.vector_class.draw_start_state(self.np_random, options)
        self._state[0] = start
        return self.vector_class.observation_of(start), {}

    def _bind(self) -> None:
        """The serial step and reset loops of the batch's game, compiled for its buffers, and the
        NumPy views of its actions and outputs (the batch's own memory)."""
        batch = self._batch
        views = batch.kernel_args
        names = type(batch).logic.KernelArgs(*views)
        index = type(batch).logic.KernelArgs._fields.index("actions")
        self._actions = views[index]
        upper = np.array([self._largest], np.int64)
        check = self._discrete and batch.validate_actions
        self._loop_args = (1, views[:index], self._actions, views[index + 1 :], self._actions)
        self._loop_args += (upper, check)
        driver = batch._driver
        self._loop = driver.compiled_step(*self._loop_args)
        self._reset_args = (1, np.ones(1, np.bool_), views)
        self._reset_loop = driver.reset_loop.compile(tuple(map(numba.typeof, self._reset_args)))
        self._obs, self._rewards = names.obs[0], names.rewards
        self._terminations, self._truncations = names.terminated, names.truncated

    def _unbind(self, loop) -> None:
        """Step with ``loop`` (one that raises), writing actions into a buffer of its own."""
        self._loop, self._loop_args = loop, ()
        self._actions = np.zeros((1, *(self._box_shape or ())))

    def step(self, action):
        kind = type(action)
        if kind in self._written_as_is or (kind is np.ndarray and action.shape == self._box_shape):
            try:
                self._actions[0] = action  # (an integer's range is checked by the loop)
            except OverflowError:
                self._refuse(action)
        else:
            self._check_action(action)
            self._actions[0] = action
        if self._loop(*self._loop_args):
            self._refuse(action)
        reward = float(self._rewards[0])
        terminated = bool(self._terminations[0])
        if self._terminated:
            if self._terminated == "terminated":
                gym.logger.warn(
                    "step() called after this episode terminated, without reset(): the dynamics "
                    "go on as in gymnasium's env, but these steps are undefined behaviour; call "
                    "reset() when terminated is True"
                )
                self._terminated = "warned"
            reward = self.reward_after_termination(reward)
        elif terminated:
            self._terminated = "terminated"
        return self._obs.copy(), reward, terminated, bool(self._truncations[0]), {}

    def _check_action(self, action) -> None:
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            if not space.contains(action):
                self._refuse(action)
        elif np.shape(action) != space.shape:
            raise ValueError(f"action must have shape {space.shape}, got {action!r}")

    def _refuse(self, action) -> None:
        largest = self._largest
        allowed = "0 or 1" if largest == 1 else f"an int in 0..{largest}"
        raise ValueError(f"action must be {allowed}, got {action!r}")

    def render(self):
        """An RGB frame (H, W, 3 uint8) when ``render_mode="rgb_array"``."""
        frames = self._batch.render()
        return None if frames is None else frames[0]

    def close(self) -> None:
        self._batch.close()
        self._unbind(_closed)

    def __getstate__(self) -> dict[str, Any]:
        state = {key: value for key, value in self.__dict__.items() if key not in _BOUND}
        state["_bound"] = self._loop not in (_before_reset, _closed)
        state["_closed"] = self._loop is _closed
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        bound, closed = state.pop("_bound"), state.pop("_closed")
        self.__dict__.update(state)
        self._unbind(_closed if closed else _before_reset)
        if not closed:
            self._state = self._batch.state.numpy()
        if bound:
            self._bind()


def _before_reset(*_args) -> bool:
    raise RuntimeError("call reset() before step()")


def _closed(*_args) -> bool:
    raise RuntimeError("this env is closed; make a new one")
