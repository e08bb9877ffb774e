"""Self-play against a pool of frozen opponents.

Plain self-play trains each team against the other team's current policy only, and a team forgets
how to play the opponents it met earlier: runners that learned to flee chasing taggers are no
better than random runners at avoiding random taggers. Fictitious self-play and league training
keep past policies in play; so does this pool.

With ``opponents.share`` > 0 a share of each rank's envs is set aside and split evenly among the
policies (the first envs for the first policy, and so on). In policy ``p``'s part, ``p``'s agents
are played by a frozen copy of ``p`` and only the other policies learn there: ``p``'s own steps in
those envs are masked out of its update (``valid`` 0). The frozen copy is drawn uniformly, at the
start of every rollout, from ``p``'s pool: its initial weights (near-uniform actions, the random
team) and its newest ``pool_size`` snapshots, taken every ``snapshot_freq`` rollouts.
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Sequence

import torch

from gpu_envs.runs.config import OpponentsConfig
from gpu_envs.trainers.rollout import PolicyGroup, RolloutBuffer


def _detached(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in state.items()}


class OpponentPool:
    """Every policy's frozen opponents and the envs they play in (see the module docstring)."""

    def __init__(
        self, groups: Sequence[PolicyGroup], config: OpponentsConfig, num_envs: int, seed: int
    ):
        per_policy = int(config.share * num_envs) // len(groups)
        self.envs = {
            group.tag: slice(index * per_policy, (index + 1) * per_policy)
            for index, group in enumerate(groups)
        }
        self.groups = list(groups)
        self.snapshot_freq, self.pool_size = config.snapshot_freq, config.pool_size
        self.initial = {g.tag: _detached(g.module.state_dict()) for g in groups}
        self.snapshots: dict[str, collections.deque] = {
            g.tag: collections.deque(maxlen=config.pool_size) for g in groups
        }
        self.players = {g.tag: copy.deepcopy(g.module).requires_grad_(False) for g in groups}
        self.generator = torch.Generator().manual_seed(seed)
        self.rollouts = 0

    def next_rollout(self) -> None:
        """Before a rollout: snapshot the policies when due, then draw each policy's frozen copy."""
        due = self.rollouts and self.rollouts % self.snapshot_freq == 0
        if due and self.pool_size > 0:  # a pool of size 0 holds only the initial weights
            for group in self.groups:
                self.snapshots[group.tag].append(_detached(group.module.state_dict()))
        self.rollouts += 1
        for group in self.groups:
            pool = [self.initial[group.tag], *self.snapshots[group.tag]]
            drawn = int(torch.randint(len(pool), (), generator=self.generator))
            self.players[group.tag].load_state_dict(pool[drawn])

    def play(
        self, group: PolicyGroup, obs: torch.Tensor, buf: RolloutBuffer, t: int, sampler, nvec
    ) -> None:
        """Replace ``group``'s actions of step ``t`` in its frozen envs by its frozen copy's.
        ``obs``: [E, n, obs_dim] of ``group``'s agents."""
        envs = self.envs[group.tag]
        frozen_obs = obs[envs]
        logits, _ = self.players[group.tag](frozen_obs.reshape(-1, obs.shape[-1]))
        buf.actions[t, envs] = sampler(logits, nvec).view(*frozen_obs.shape[:2], -1)

    def mask_frozen_steps(self, group: PolicyGroup, buf: RolloutBuffer) -> None:
        """Mask ``group``'s steps in its frozen envs out of its update (``valid`` 0)."""
        buf.valid[:, self.envs[group.tag]] = 0

    def state_dict(self) -> dict:
        """The pool for a checkpoint: its weights, the rollout count and the draws' RNG."""
        return {
            "initial": self.initial,
            "snapshots": {tag: list(pool) for tag, pool in self.snapshots.items()},
            "rollouts": self.rollouts,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.initial = state["initial"]
        for tag, pool in self.snapshots.items():
            pool.clear()
            pool.extend(state["snapshots"][tag])
        self.rollouts = int(state["rollouts"])
        self.generator.set_state(state["generator"])


def make_pool(
    groups: Sequence[PolicyGroup], config: OpponentsConfig, num_envs: int, seed: int
) -> OpponentPool | None:
    """The run's pool, or None when ``config.share`` is 0 (plain self-play)."""
    if not config.share:
        return None
    return OpponentPool(groups, config, num_envs, seed)
