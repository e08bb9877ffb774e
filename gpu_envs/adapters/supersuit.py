"""Agents that leave a PettingZoo game, kept in place for SuperSuit's vector envs.

SuperSuit's ``pettingzoo_env_to_vec_env_v1`` needs every agent in every step, so a game whose
agents leave (Tag's runners with ``runner_exits_game_after_tagged=True``) needs SuperSuit's
``black_death_v3``. In SuperSuit 3.11 that wrapper never reports the end of a game (it ends the
game when every agent is terminated *and* truncated, which no PettingZoo env reports; fixed upstream
by Farama-Foundation/SuperSuit#265, not yet released): the vector env then steps a finished game.
:class:`BlackDeath` is the same wrapper with the game's end reported; docs/using-with-marl.md has
the recipe and the error SuperSuit's own wrapper leads to.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pettingzoo import ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper

__all__ = ["BlackDeath"]


class BlackDeath(BaseParallelWrapper):
    """Keeps every agent of a game in ``agents`` until the game ends.

    An agent that left gets zero observations, reward 0 and an empty info on every later step,
    and ``terminations``/``truncations`` stay False for all agents until the game ends (no agent of
    the wrapped env is left). Then every agent is done at once: truncated when the game was cut
    short (an agent reported ``truncations``), else terminated.
    """

    def __init__(self, env: ParallelEnv):
        super().__init__(env)
        self.agents: list[str] = []

    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        return observations, infos

    def step(self, actions: dict[str, Any]):
        live = {agent: actions[agent] for agent in self.env.agents}
        observations, rewards, terminations, truncations, infos = self.env.step(live)
        for agent in self.agents:
            if agent not in observations:
                space = self.observation_space(agent)
                observations[agent] = np.zeros(space.shape, space.dtype)
                rewards[agent] = 0.0
                infos[agent] = {}
        game_over = not self.env.agents
        cut = game_over and any(truncations.values())
        terminations = {agent: game_over and not cut for agent in self.agents}
        truncations = {agent: cut for agent in self.agents}
        if game_over:
            self.agents = []
        return observations, rewards, terminations, truncations, infos
