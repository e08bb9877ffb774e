"""Tag as a PettingZoo environment, in the module convention of ``pettingzoo.mpe``'s
``simple_tag_v3``.

- ``parallel_env(**params)``: one game as a ``pettingzoo.ParallelEnv`` (NumPy in and out).
- ``env(**params)``: the same game as an AEC env (``parallel_to_aec``, order enforced);
  ``raw_env(**params)``: the AEC conversion without the order-enforcing wrapper.
- ``vector_env(num_envs, device, **params)``: the batched ``TagEnv`` (torch tensors
  [num_envs, num_agents, ...] on ``device``), for trainers that step many games at once.

``params`` are the parameters of docs/spec-tag.md by name (``num_taggers``, ``num_runners``,
``grid_length``, ..., ``seed``, ``reset_mode``, ``observe_self``); the single game also takes
``render_mode`` (None, "rgb_array" or "human") and ``max_cycles``.

## Agents, spaces
Agents ``tagger_0..`` then ``runner_0..`` (``possible_agents``, the ids of the batched env in
order). Each has its own ``MultiDiscrete([A+1, R+1])`` action space (acceleration index, turn
index; index 0 is "no change") and ``Box(-inf, inf, (obs_dim,), float32)`` observation space; the
same objects are returned on every call.

## Episode
A runner tagged in a game where runners exit is reported once more, on the step it was tagged
(its reward, its out-of-game observation, ``terminations`` True), and then leaves ``agents``. When
the game ends (t == T or no runner left) every remaining agent is terminated and ``agents`` is
empty; call ``reset()``. That end is a rule of the game, reported in ``terminations``.

``max_cycles`` (the ``simple_tag_v3`` convention; default None, no limit) is a time limit on top of
the game: after ``max_cycles`` steps of a game that has not ended, every remaining agent gets
``truncations`` True and ``agents`` is empty. It leaves the game's ``episode_length`` (the
``T`` that observations count towards) alone, so it only matters when ``max_cycles <
episode_length``; at ``max_cycles == episode_length`` the game ends by its rule first.

## Rendering
``render_mode="rgb_array"``: ``render()`` returns the frame (H, W, 3 uint8).
``render_mode="human"``:
``render()`` returns None and shows the frame in a pygame window when a display is there (an X11 or
Wayland display, another OS, or ``SDL_VIDEODRIVER`` set); without one (a headless server, CI) it
opens nothing and only keeps the frame in ``last_frame`` (use "rgb_array" to record videos).

## Global state
``state()`` is a float32 vector of size ``7 N + 1``: for each agent in id order ``x/L, y/L,
speed/max_speed, acceleration/max_speed, heading/(2 pi), type (1 tagger, 0 runner), in-game
flag``, then ``t/T`` (``state_space`` is its Box).

## Seeding
``reset(seed=s)`` seeds the game (start state) with ``s`` and each agent's action and observation
space with a seed derived from ``(s, agent index)``, so ``space.sample()`` is reproducible.
``reset`` accepts ``options`` for API compatibility; a single game has none and ignores them.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import gymnasium
import numpy as np
import torch
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec, parallel_to_aec_wrapper

from gpu_envs.games.tag.env import TagEnv

__all__ = ["TagParallelEnv", "env", "parallel_env", "raw_env", "vector_env"]

_BATCH_ONLY = ("num_envs", "device", "autoreset_mode")


class TagParallelEnv(ParallelEnv):
    """One game of Tag as a PettingZoo ``ParallelEnv`` (see the module docstring for the rules)."""

    metadata: dict[str, Any] = {
        "name": "tag_v0",
        "render_modes": ["rgb_array", "human"],
        "render_fps": TagEnv.metadata["render_fps"],
        "is_parallelizable": True,
    }

    def __init__(
        self, render_mode: str | None = None, max_cycles: int | None = None, **params: Any
    ):
        given = [name for name in _BATCH_ONLY if name in params]
        if given:
            raise TypeError(
                f"parallel_env is one game on the CPU and does not take {given}; use "
                "gpu_envs.tag_v0.vector_env(num_envs, device, ...) for batches"
            )
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got "
                f"{render_mode!r}"
            )
        if max_cycles is not None and (
            isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1
        ):
            raise ValueError(
                f"max_cycles must be None (no limit) or an integer >= 1, got {max_cycles!r}"
            )
        self.render_mode, self.max_cycles = render_mode, max_cycles
        self._game = TagEnv(
            num_envs=1,
            device="cpu",
            autoreset_mode="disabled",
            render_mode=None if render_mode is None else "rgb_array",
            **params,
        )
        self._cycles = 0
        self._window: _HumanWindow | None = None
        self.last_frame: np.ndarray | None = None
        self.possible_agents = list(self._game.agent_names)
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        nvec = np.asarray(self._game.action_nvec, dtype=np.int64)
        obs_shape = (self._game.obs_dim,)
        self.observation_spaces = {
            name: gymnasium.spaces.Box(-np.inf, np.inf, obs_shape, dtype=np.float32)
            for name in self.possible_agents
        }
        self.action_spaces = {
            name: gymnasium.spaces.MultiDiscrete(nvec) for name in self.possible_agents
        }
        self.state_space = gymnasium.spaces.Box(
            -np.inf, np.inf, (7 * self._game.num_agents + 1,), dtype=np.float32
        )
        self._actions = np.zeros((1, self._game.num_agents, 2), dtype=np.int64)

    # ------------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> gymnasium.spaces.Box:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.MultiDiscrete:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, _ = self._game.reset(seed=seed)
        if seed is not None:
            for i, name in enumerate(self.possible_agents):
                derived = np.random.SeedSequence([int(seed), i]).generate_state(2)
                self.action_spaces[name].seed(int(derived[0]))
                self.observation_spaces[name].seed(int(derived[1]))
        self.agents = list(self.possible_agents)
        self._cycles = 0
        rows = obs[0].numpy()
        return {name: rows[i] for i, name in enumerate(self.agents)}, {
            name: {} for name in self.agents
        }

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError(
                "no agent is in the game (not reset yet, or the game is over): call reset()"
            )
        self._actions.fill(0)
        unexpected = set(actions) - set(self.agents)
        if unexpected:
            raise ValueError(f"actions given for agents not in the game: {sorted(unexpected)}")
        for name in self.agents:
            if name not in actions:
                raise ValueError(f"no action for {name}: every agent in `agents` must act")
            action = np.asarray(actions[name])
            if action.dtype.kind not in "iu" or not self.action_spaces[name].contains(action):
                raise ValueError(
                    f"action of {name} must be 2 integers in {self.action_spaces[name]} "
                    f"(acceleration index, turn index), got {actions[name]!r}"
                )
            self._actions[0, self._index[name]] = action
        obs, rewards, terminated, truncated, info = self._game.step(self._actions)
        rows, rewards = obs[0].numpy(), rewards[0].numpy()
        active = info["active"][0].numpy()
        self._cycles += 1
        game_over = bool(terminated[0])
        cut = bool(truncated[0]) or (
            self.max_cycles is not None and self._cycles >= self.max_cycles
        )
        live = self.agents
        observations = {name: rows[self._index[name]] for name in live}
        reward = {name: float(rewards[self._index[name]]) for name in live}
        terminations = {name: game_over or not bool(active[self._index[name]]) for name in live}
        truncations = {name: cut and not terminations[name] for name in live}
        self.agents = [name for name in live if not (terminations[name] or truncations[name])]
        return observations, reward, terminations, truncations, {name: {} for name in live}

    def state(self) -> np.ndarray:
        s = self._game.state
        p = self._game.params
        n, num_taggers = self._game.num_agents, self._game.num_taggers
        columns = torch.stack(
            [
                s["x"][0] / p.grid_length,
                s["y"][0] / p.grid_length,
                s["speed"][0] / p.max_speed,
                s["acceleration"][0] / p.max_speed,
                s["heading"][0] / (2 * math.pi),
                (torch.arange(n) < num_taggers).float(),
                s["active"][0].float(),
            ],
            dim=1,
        )
        time = (s["t"][0].float() / self._game.episode_length).reshape(1)
        return torch.cat([columns.reshape(-1), time]).numpy().astype(np.float32)

    def render(self) -> np.ndarray | None:
        """The frame (H, W, 3 uint8) for "rgb_array"; None for "human" (shown, see the module
        docstring)."""
        frames = self._game.render()
        if frames is None:
            return None
        if self.render_mode == "rgb_array":
            return frames[0]
        self.last_frame = frames[0]
        if self._window is None and _HumanWindow.display_available():
            self._window = _HumanWindow(self.metadata["render_fps"])
        if self._window is not None:
            self._window.show(self.last_frame)
        return None

    def close(self) -> None:
        if self._window is not None:
            self._window.close()
            self._window = None
        self._game.close()


class _HumanWindow:
    """A pygame window that shows RGB frames at up to ``fps`` frames per second."""

    def __init__(self, fps: float):
        import pygame

        self._pygame, self._fps = pygame, fps
        pygame.display.init()
        pygame.display.set_caption("tag_v0")
        self._screen: Any = None  # the pygame window's surface, made at the first frame
        self._clock = pygame.time.Clock()

    @staticmethod
    def display_available() -> bool:
        """True where pygame can open a window: a display, a non-Linux OS, or an SDL video driver
        chosen."""
        return (
            sys.platform != "linux"
            or "SDL_VIDEODRIVER" in os.environ
            or any(os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY"))
        )

    def show(self, frame: np.ndarray) -> None:
        pygame = self._pygame
        if self._screen is None:
            self._screen = pygame.display.set_mode((frame.shape[1], frame.shape[0]))
        pygame.event.pump()
        self._screen.blit(pygame.surfarray.make_surface(frame.swapaxes(0, 1)), (0, 0))
        pygame.display.flip()
        self._clock.tick(self._fps)

    def close(self) -> None:
        self._pygame.display.quit()


def parallel_env(
    render_mode: str | None = None, max_cycles: int | None = None, **params: Any
) -> TagParallelEnv:
    """One game of Tag as a PettingZoo ``ParallelEnv``."""
    return TagParallelEnv(render_mode=render_mode, max_cycles=max_cycles, **params)


def raw_env(
    render_mode: str | None = None, max_cycles: int | None = None, **params: Any
) -> parallel_to_aec_wrapper:
    """One game of Tag as an AEC env, without the order-enforcing wrapper."""
    return parallel_to_aec_wrapper(
        parallel_env(render_mode=render_mode, max_cycles=max_cycles, **params)
    )


def env(render_mode: str | None = None, max_cycles: int | None = None, **params: Any):
    """One game of Tag as an AEC env (``parallel_to_aec``: agents act in turn, order enforced)."""
    return parallel_to_aec(parallel_env(render_mode=render_mode, max_cycles=max_cycles, **params))


def vector_env(num_envs: int = 1, device: str | torch.device = "cpu", **params: Any) -> TagEnv:
    """``num_envs`` games stepped together on ``device``: the batched ``TagEnv``."""
    return TagEnv(num_envs=num_envs, device=device, **params)
