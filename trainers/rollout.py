"""Rollout collection on the device: the policies at run time, their buffers and the step loop.

Nothing in ``Collector.collect`` reads a value back to the host: observations, actions, values,
log-probabilities (stored at rollout time, so PPO's first ratio is exactly 1), rewards and flags
stay in device tensors. Episode statistics are reduced once per rollout, after the step loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gpu_envs.runs.config import PolicyConfig
from gpu_envs.runs.speed import PhaseTimer
from gpu_envs.trainers import cuda_graph_rollout
from gpu_envs.trainers.policy import action_dtype, log_prob


@dataclass
class PolicyGroup:
    """A policy at run time: its config, network (possibly Fabric-wrapped), optimiser, agents and
    gradient step."""

    tag: str
    config: PolicyConfig
    model: torch.nn.Module  # what to call (Fabric/DDP wrapper when trained)
    module: torch.nn.Module  # the plain network (state_dict, parameters)
    optimizer: object | None
    agents: slice | torch.Tensor  # index into the agent axis
    num_agents: int
    step: Callable | None = None  # learner.make_step's choice; None: not trained


def agent_index(ids: list[int], device: torch.device) -> slice | torch.Tensor:
    """The index of agent ``ids`` into the agent axis: a slice when contiguous, else a tensor."""
    ids = sorted(ids)
    if ids == list(range(ids[0], ids[-1] + 1)):
        return slice(ids[0], ids[-1] + 1)
    return torch.tensor(ids, device=device)


@dataclass
class RolloutBuffer:
    """One policy's rollout: [T, E, n, ...] tensors; ``next_value`` [E, n] bootstraps the last step.

    ``valid`` is 1 where the transition counts (the agent was in the game before the step and the
    step is not an env's reset step), ``terminated``/``done`` are per agent (an env's end is
    broadcast to its agents; a runner leaving the game is terminated at that step).
    """

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    valid: torch.Tensor
    terminated: torch.Tensor
    done: torch.Tensor
    next_value: torch.Tensor

    @classmethod
    def allocate(
        cls,
        steps: int,
        envs: int,
        agents: int,
        obs_dim: int,
        heads: int,
        device: torch.device,
        actions_dtype: torch.dtype = torch.int64,
    ) -> RolloutBuffer:
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        return cls(
            obs=zeros(steps, envs, agents, obs_dim),
            actions=zeros(steps, envs, agents, heads, dtype=actions_dtype),
            log_probs=zeros(steps, envs, agents),
            values=zeros(steps, envs, agents),
            rewards=zeros(steps, envs, agents),
            valid=zeros(steps, envs, agents),
            terminated=zeros(steps, envs, agents),
            done=zeros(steps, envs, agents),
            next_value=zeros(envs, agents),
        )


def shaping_reward(
    phi: torch.Tensor, next_phi: torch.Tensor, terminated: torch.Tensor, valid: torch.Tensor, gamma
) -> torch.Tensor:
    """Potential-based shaping ``F = gamma * Phi(s') - Phi(s)`` (Ng, Harada & Russell 1999), with
    ``Phi(s') = 0`` when the transition terminated and ``F = 0`` where it is not valid (an env's
    reset step): over an episode ``sum_t gamma^t F_t = gamma^T Phi(s_T) - Phi(s_0)``."""
    return (gamma * next_phi * (1.0 - terminated) - phi) * valid


class Collector:
    """Steps ``game`` for ``num_steps`` per rollout with every policy acting for its agents.

    The observation, the previous step's done flags and the running episode sums carry over from
    one rollout to the next. With ``opponents`` (an ``opponents.OpponentPool``) frozen copies of
    the policies play in the envs the pool sets aside.
    """

    def __init__(
        self,
        game,
        groups: list[PolicyGroup],
        num_steps: int,
        sampler,
        timer: PhaseTimer,
        opponents=None,
        cuda_graphs: bool = True,
        reward_shaping: float = 0.0,
    ):
        self.game, self.groups, self.num_steps = game, groups, num_steps
        self.reward_shaping = reward_shaping
        self.sampler, self.timer = sampler, timer
        self.opponents = opponents  # an opponents.OpponentPool, or None
        device = game.active.device
        envs, agents = game.num_envs, game.num_agents
        heads, dtype = len(game.action_nvec), action_dtype(game.action_nvec)
        self.buffers = {
            g.tag: RolloutBuffer.allocate(
                num_steps, envs, g.num_agents, game.obs_dim, heads, device, dtype
            )
            for g in groups
        }
        self.actions = torch.zeros((envs, agents, heads), dtype=dtype, device=device)
        # Each step's env-level outputs; the policies' buffers are filled from them after the loop.
        self.env_reset = torch.zeros((num_steps, envs), dtype=torch.bool, device=device)
        self.env_done = torch.zeros((num_steps, envs), dtype=torch.bool, device=device)
        self.env_terminated = torch.zeros((num_steps, envs), dtype=torch.bool, device=device)
        self.active_before = torch.zeros((num_steps, envs, agents), dtype=torch.bool, device=device)
        self.active_after = torch.zeros((num_steps, envs, agents), dtype=torch.bool, device=device)
        self.rewards = torch.zeros((num_steps, envs, agents), dtype=torch.float32, device=device)
        # with reward shaping: Phi of the observation before each step, then after the last one
        self.potentials: torch.Tensor | None = None
        self.obs: torch.Tensor | None = None
        self.prev_done = torch.zeros(envs, dtype=torch.bool, device=device)
        self.episode_returns = torch.zeros((envs, agents), dtype=torch.float64, device=device)
        self.episode_lengths = torch.zeros(envs, dtype=torch.float64, device=device)
        self.return_snapshots = torch.zeros(
            (num_steps, envs, agents), dtype=torch.float64, device=device
        )
        self.length_snapshots = torch.zeros((num_steps, envs), dtype=torch.float64, device=device)
        self.matchups = {g.tag: self._matchup_masks(g.tag, envs, device) for g in groups}
        # trainer.cuda_graphs: on CUDA, each rollout replays one captured graph (None: eager)
        self.graph = cuda_graph_rollout.make(self, cuda_graphs)

    def _matchup_masks(self, tag: str, envs: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """[E] masks of the envs where policy ``tag`` learns against a frozen opponent (another
        policy's part of the pool's envs) and where every policy learns (self-play); all 0
        without a pool."""
        vs_frozen = torch.zeros(envs, dtype=torch.float64, device=device)
        selfplay = torch.zeros(envs, dtype=torch.float64, device=device)
        if self.opponents is not None:
            selfplay.fill_(1.0)
            for other, part in self.opponents.envs.items():
                selfplay[part] = 0.0
                if other != tag:
                    vs_frozen[part] = 1.0
        return vs_frozen, selfplay

    def warm_up(self) -> None:
        """Compile the env's kernels and the sampler's with one step of zero actions."""
        self.game.reset(0)
        self.game.step(torch.zeros_like(self.actions))
        logits = torch.zeros((2, sum(self.game.action_nvec)), device=self.actions.device)
        self.sampler(logits, self.game.action_nvec)
        if self.graph is not None:
            self.graph.capture()

    def reset(self, seed: int | None) -> None:
        """Reset every env (``seed``: env i gets seed + i) and the running episode sums."""
        self.obs = self.game.reset(seed)
        self.prev_done.zero_()
        self.episode_returns.zero_()
        self.episode_lengths.zero_()

    def collect(self) -> dict[str, RolloutBuffer]:
        """One rollout of ``num_steps`` steps; returns the filled buffers (reused next call).
        With a captured CUDA graph (``trainer.cuda_graphs``) it is one replay of it."""
        if self.graph is not None and self.graph.graph is not None:
            return self.graph.replay()
        return self.collect_eagerly()

    @torch.no_grad()
    def collect_eagerly(self) -> dict[str, RolloutBuffer]:
        """:meth:`collect`, step by step: per step the policies act and the env's outputs are
        stored once; each policy's rewards, flags and ``valid`` are then taken from them for the
        whole rollout at once (a few torch calls per rollout instead of per step)."""
        if self.obs is None:
            raise RuntimeError("Collector: reset() the envs before the first collect()")
        nvec = self.game.action_nvec
        timer = self.timer
        if self.opponents is not None:
            self.opponents.next_rollout()
        if self.reward_shaping:
            potentials = [self.game.potential(self.obs)]
        for t in range(self.num_steps):
            self.active_before[t] = self.game.active
            self.env_reset[t] = self.prev_done
            for group in self.groups:
                buf = self.buffers[group.tag]
                obs = self.obs[:, group.agents]
                buf.obs[t] = obs
                with timer.phase("policy_eval"):
                    logits, value = group.module(obs.reshape(-1, self.game.obs_dim))
                with timer.phase("action_sampling"):
                    action = self.sampler(logits, nvec)
                    log_probs = log_prob(logits, action, nvec)
                shape = obs.shape[:2]
                buf.values[t] = value.view(shape)
                buf.log_probs[t] = log_probs.view(shape)
                buf.actions[t] = action.view(*shape, -1)
                if self.opponents is not None:
                    with timer.phase("policy_eval"):
                        self.opponents.play(group, obs, buf, t, self.sampler, nvec)
                self.actions[:, group.agents] = buf.actions[t]
            with timer.phase("env_step"):
                self.obs, rewards, terminated, truncated, active_after = self.game.step(
                    self.actions
                )
            if self.reward_shaping:
                potentials.append(self.game.potential(self.obs))
            self.active_after[t] = active_after
            self.env_terminated[t] = terminated
            self.prev_done = terminated | truncated
            self.rewards[t] = rewards
            self.env_done[t] = self.prev_done
        with timer.phase("policy_eval"):
            for group in self.groups:
                _, value = group.module(self.obs[:, group.agents].reshape(-1, self.game.obs_dim))
                self.buffers[group.tag].next_value.copy_(value.view(self.obs.shape[0], -1))
        if self.reward_shaping:
            self.potentials = self.reward_shaping * torch.stack(potentials)
        self._fill_outcomes()
        self._track_episodes()
        return self.buffers

    def _fill_outcomes(self) -> None:
        """Each policy's ``valid``, ``rewards``, ``terminated`` and ``done`` of the rollout (and its
        shaping reward) from the env-level outputs stored per step."""
        left_game = self.active_before & ~self.active_after  # [T, E, N]: a runner tagged out
        for group in self.groups:
            buf, agents = self.buffers[group.tag], group.agents
            left = left_game[:, :, agents]
            buf.valid.copy_(self.active_before[:, :, agents] & ~self.env_reset[:, :, None])
            if self.opponents is not None:
                self.opponents.mask_frozen_steps(group, buf)
            buf.rewards.copy_(self.rewards[:, :, agents])
            buf.terminated.copy_(self.env_terminated[:, :, None] | left)
            buf.done.copy_(self.env_done[:, :, None] | left)
            if self.potentials is not None:
                buf.rewards += shaping_reward(
                    self.potentials[:-1],
                    self.potentials[1:],
                    buf.terminated,
                    buf.valid,
                    group.config.gamma,
                )

    def _track_episodes(self) -> None:
        """Running episode return per agent and length per env, snapshotted at every step."""
        for t in range(self.num_steps):
            keep = (~self.env_reset[t]).to(torch.float64)
            self.episode_returns.mul_(keep[:, None]).add_(self.rewards[t])
            self.episode_lengths.mul_(keep).add_(keep)
            self.return_snapshots[t] = self.episode_returns
            self.length_snapshots[t] = self.episode_lengths

    def episode_stats(self, group: PolicyGroup) -> dict[str, torch.Tensor]:
        """Sums over the episodes that ended in the last rollout, for ``group``'s agents (also
        those against a frozen opponent and those of self-play, ``_matchup_masks``), and its agent
        steps (device tensors)."""
        done = self.env_done.to(torch.float64)
        team = self.return_snapshots[:, :, group.agents].sum(-1)
        ended = self.env_done
        inf = torch.tensor(float("inf"), dtype=torch.float64, device=done.device)
        return {
            "episode_count": done.sum(),
            "return_sum": (team * done).sum(),
            "return_sumsq": (team**2 * done).sum(),
            "return_max": torch.where(ended, team, -inf).max(),
            "return_min": torch.where(ended, team, inf).min(),
            "length_sum": (self.length_snapshots * done).sum(),
            "agentstep_count": self.buffers[group.tag].valid.sum().double(),
            **{
                f"{kind}_{name}": (values * done * mask).sum()
                for kind, mask in zip(("vs_frozen", "selfplay"), self.matchups[group.tag])
                for name, values in (("episode_count", 1.0), ("return_sum", team))
            },
        }

    def action_std(self, group: PolicyGroup) -> torch.Tensor:
        """[H, 3]: std of each action index of ``group`` in the last rollout over agents, envs and
        time (valid entries only, averaged over the other axes)."""
        buf = self.buffers[group.tag]
        actions = buf.actions.to(torch.float32)  # [T, E, n, H]
        valid = buf.valid.unsqueeze(-1)
        out = []
        for dim in (2, 1, 0):
            count = valid.sum(dim).clamp(min=1.0)
            mean = (actions * valid).sum(dim, keepdim=True) / count.unsqueeze(dim)
            var = (((actions - mean) ** 2) * valid).sum(dim) / count
            out.append(var.sqrt().mean(dim=tuple(range(var.dim() - 1))))
        return torch.stack(out, dim=-1)
