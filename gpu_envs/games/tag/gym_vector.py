"""Tag as a gymnasium ``VectorEnv`` whose rows are (game, agent) pairs, for parameter-sharing
single-agent libraries. Made by ``gym.make_vec("gpu_envs/Tag-v0", num_envs=E, device=...)``
(``gym.make`` is not offered: a single row is not a game; use ``gpu_envs.tag_v0.parallel_env``
for one game)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gpu_envs.engine.validation import parse_autoreset_mode
from gpu_envs.games.tag.env import TagEnv


def single_env_unavailable(**kwargs: Any) -> gym.Env:
    """The ``entry_point`` of "gpu_envs/Tag-v0": ``gym.make`` of it raises an error that says what
    to use."""
    raise gym.error.Error(
        "gpu_envs/Tag-v0 is a multi-agent game and has no single-agent gym.make env (one row is "
        "one agent, not a game). Use gym.make_vec('gpu_envs/Tag-v0', num_envs=GAMES, device=...) "
        "for (game, agent) rows with a shared policy, or gpu_envs.tag_v0.parallel_env() for one "
        "game as a PettingZoo ParallelEnv."
    )


class TagGymVectorEnv(VectorEnv):
    """``E`` games of Tag with ``N`` agents each, seen as ``E * N`` single-agent rows.

    Rows: ``self.num_envs = E * N`` (the constructor's ``num_envs`` is the number of GAMES ``E``,
    also kept as ``self.num_games``). Row ``r`` is agent ``r % N`` of game ``r // N``; agents
    ``0..num_taggers-1`` of each game are taggers (``agent_names`` / ``taggers`` / ``runners`` as in
    ``TagEnv``).

    Spaces: ``single_observation_space`` is ``Box(-inf, inf, (obs_dim,), float32)``, the game's
    observation with ``observe_self`` forced on (its last value is the agent's type: 1 tagger, 0
    runner, so one shared policy knows its role). ``single_action_space`` is
    ``MultiDiscrete([A+1, R+1])`` (acceleration index, turn index); ``step`` takes one action per
    row, an integer tensor/array [E * N, 2].

    Rewards and done flags, per row: the row's agent's reward in its game. A row is ``terminated``
    on the step its game ends (t == T or no runner left) if its agent was still in the game, and on
    the step its runner is tagged and exits (``runner_exits_game_after_tagged``). ``truncated`` is
    always False (the end of Tag is a rule of the game).

    Dead rows: after its runner exits, a row stays in the batch until its game resets. Until then it
    is "dead": its observation is the game's out-of-game observation (all zeros with partial
    observation), its reward 0, its flags False, and its actions are ignored. ``info["dead"]``
    [E * N] bool marks the rows whose agent was already out of the game when the step began: their
    transitions (including the one into the next game's first observation) are padding, to be
    masked out of losses and episode statistics. ``info["active"]`` [E * N] bool: the row's agent is
    in the game after this step.

    Autoreset (``autoreset_mode``) works per game, as in ``TagEnv``: NEXT_STEP (default) resets a
    game on the step after it ended (rewards 0, flags False, actions ignored); SAME_STEP resets in
    the ending step and puts the last observation in ``info["final_obs"]`` [E * N, obs_dim] with
    ``info["_final_obs"]`` True on the rows that terminated with their game; DISABLED leaves
    resetting to ``reset(options={"reset_mask": games})`` (a bool mask over GAMES, [E]).

    Seeding: ``reset(seed=s)`` seeds game ``e`` with ``s + e``. All tensors live on ``device``.

    Args:
        num_envs: number of games E.
        device: "cpu", "cuda", "cuda:N" or "auto".
        autoreset_mode: ``AutoresetMode`` or its name.
        render_mode: None or "rgb_array" (``render()`` gives one frame per GAME).
        validate_actions: check actions before each step (see ``TagEnv``).
        params: the Tag parameters of docs/spec-tag.md (``observe_self`` may be given only as True).
    """

    metadata = {
        "render_modes": ["rgb_array"],
        "render_fps": TagEnv.metadata["render_fps"],
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        validate_actions: bool = True,
        **params: Any,
    ):
        if params.get("observe_self", True) is not True:
            raise ValueError(
                "TagGymVectorEnv forces observe_self=True (a shared policy must see its role); "
                f"got observe_self={params['observe_self']!r}"
            )
        params["observe_self"] = True
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self._game = TagEnv(
            num_envs=num_envs,
            device=device,
            autoreset_mode=self.autoreset_mode,
            validate_actions=validate_actions,
            render_mode=render_mode,
            **params,
        )
        game = self._game
        self.num_games = game.num_envs
        self.num_agents = game.num_agents
        self.num_envs = self.num_games * self.num_agents
        self.device = game.device
        self.render_mode = render_mode
        self.agent_names, self.taggers, self.runners = game.agent_names, game.taggers, game.runners
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}

        self.single_observation_space = gym.spaces.Box(
            -np.inf, np.inf, (game.obs_dim,), dtype=np.float32
        )
        self.single_action_space = gym.spaces.MultiDiscrete(
            np.asarray(game.action_nvec, dtype=np.int64)
        )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    @property
    def game_env(self) -> TagEnv:
        """The batched game env underneath ([E, N, ...] tensors, ``state``, per-team views)."""
        return self._game

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every game, or the games in ``options["reset_mask"]`` (bool [E], over games)."""
        obs, _ = self._game.reset(seed=seed, options=options)
        return self._rows(obs), {"active": self._rows(self._game.state["active"].clone())}

    def step(self, actions):
        """One step of every game; ``actions``: integer tensor/array [E * N, 2], one per row."""
        shape = tuple(actions.shape) if hasattr(actions, "shape") else np.shape(actions)
        if shape != (self.num_envs, 2):
            raise ValueError(
                f"actions must have shape ({self.num_envs}, 2): one (acceleration index, turn "
                f"index) per row = {self.num_games} games x {self.num_agents} agents; got {shape}"
            )
        if not isinstance(actions, torch.Tensor):
            actions = np.asarray(actions)
        was_active = self._game.state["active"].clone()
        obs, rewards, terminated, truncated, info = self._game.step(
            actions.reshape(self.num_games, self.num_agents, 2)
        )
        active = info["active"]
        # After a reset (SAME_STEP) or on a NEXT_STEP reset step `active` is the new game's: all
        # True.
        row_terminated = was_active & (terminated[:, None] | ~active)
        row_info: dict[str, Any] = {"active": self._rows(active), "dead": self._rows(~was_active)}
        if "final_obs" in info:
            row_info["final_obs"] = self._rows(info["final_obs"])
            row_info["_final_obs"] = self._rows(info["_final_obs"][:, None] & was_active)
        return (
            self._rows(obs),
            self._rows(rewards),
            self._rows(row_terminated),
            self._rows(truncated[:, None] & was_active),
            row_info,
        )

    def _rows(self, tensor: torch.Tensor) -> torch.Tensor:
        """[E, N, ...] (or [E, N]) -> [E * N, ...]."""
        return tensor.reshape(self.num_envs, *tensor.shape[2:])

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One RGB frame per GAME when ``render_mode="rgb_array"``."""
        return self._game.render()

    def close_extras(self, **kwargs) -> None:
        self._game.close()
