"""Greedy evaluation on separate envs: one episode per env, every policy taking its argmax actions.

- ``Evaluator``: the trainer's periodic evaluation of its live policies.
- ``episode_shares`` / ``gather_result``: an evaluation split over the ranks of a DDP run, each
  playing its share of the episodes, and the shares put back together in episode order.
- ``record_video(game, groups, path)``: one greedy episode as a GIF or MP4.

Scoring a saved checkpoint (``gpu-envs evaluate``) is ``gpu_envs.trainers.scores``.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import torch

from gpu_envs.runs.errors import ConfigError
from gpu_envs.trainers.policy import action_dtype, greedy_actions
from gpu_envs.trainers.rollout import PolicyGroup

CHECK_EVERY = 16  # steps between the (host-synchronising) "all episodes over?" checks


@torch.no_grad()
def greedy_step(game, groups: list[PolicyGroup], obs: torch.Tensor, actions: torch.Tensor):
    """Fill ``actions`` with every policy's greedy actions for ``obs`` and step ``game``."""
    for group in groups:
        logits, _ = group.module(obs[:, group.agents].reshape(-1, game.obs_dim))
        actions[:, group.agents] = greedy_actions(logits, game.action_nvec).view(
            obs.shape[0], -1, actions.shape[-1]
        )
    return game.step(actions)


class Evaluator:
    """Runs ``game.num_envs`` greedy episodes (one per env, env ``i`` playing episode ``first + i``
    from seed ``seed + first + i``, the same episodes at every call) and reports each policy's team
    returns."""

    def __init__(self, game, groups: list[PolicyGroup], seed: int, first: int = 0):
        self.game, self.groups = game, groups
        device = game.active.device
        self.actions = torch.zeros(
            (game.num_envs, game.num_agents, len(game.action_nvec)),
            dtype=action_dtype(game.action_nvec),
            device=device,
        )
        self.returns = torch.zeros(
            (game.num_envs, game.num_agents), dtype=torch.float64, device=device
        )
        self.lengths = torch.zeros(game.num_envs, dtype=torch.float64, device=device)
        self.seed, self.first = seed, first
        self.evaluations = 0

    def run(self) -> dict:
        """``{"returns": {tag: [episodes] tensor}, "lengths": tensor, "envsteps": int,
        "seconds": float}``."""
        start = time.perf_counter()
        self.evaluations += 1
        obs = self.game.reset(self.seed + self.first)
        self.returns.zero_()
        self.lengths.zero_()
        finished = torch.zeros(self.game.num_envs, dtype=torch.bool, device=self.returns.device)
        steps = 0
        while steps < self.game.episode_length:
            obs, rewards, terminated, truncated, _ = greedy_step(
                self.game, self.groups, obs, self.actions
            )
            running = (~finished).to(torch.float64)
            self.returns += rewards.to(torch.float64) * running[:, None]
            self.lengths += running
            finished |= terminated | truncated
            steps += 1
            if steps % CHECK_EVERY == 0 and bool(finished.all()):
                break
        returns = {g.tag: self.returns[:, g.agents].sum(-1) for g in self.groups}
        return {
            "returns": returns,
            "lengths": self.lengths.clone(),
            "envsteps": int(self.lengths.sum()),
            "seconds": time.perf_counter() - start,
        }


def episode_shares(num_episodes: int, world_size: int) -> list[int]:
    """How many of an evaluation's ``num_episodes`` episodes each rank plays (the first ranks one
    more when they do not divide evenly); rank ``r`` plays those after the shares of ranks < r."""
    if num_episodes < world_size:
        raise ConfigError(
            f"evaluation.num_episodes: the {world_size} processes split the evaluation's episodes, "
            f"so it must be at least {world_size}, got {num_episodes}"
        )
    base, extra = divmod(num_episodes, world_size)
    return [base + (rank < extra) for rank in range(world_size)]


def gather_result(result: dict, all_gather, shares: list[int]) -> dict:
    """``Evaluator.run``'s ``result`` of every rank (each its share of ``shares``), put together in
    episode order as one evaluation's: the same returns as a single ``Evaluator`` over all the
    episodes, its time the slowest rank's. A collective: every rank calls it at once
    (``all_gather``: Fabric's)."""
    tags = list(result["returns"])
    width = max(shares)
    rows = torch.stack([*(result["returns"][tag] for tag in tags), result["lengths"]])
    padded = torch.zeros((len(rows), width), dtype=torch.float64, device=rows.device)
    padded[:, : rows.shape[1]] = rows
    gathered = all_gather(padded)  # [ranks, policies + 1, width]
    episodes = torch.cat([gathered[r, :, :n] for r, n in enumerate(shares)], dim=1)
    seconds = all_gather(torch.tensor([result["seconds"]], dtype=torch.float64, device=rows.device))
    return {
        "returns": dict(zip(tags, episodes[:-1])),
        "lengths": episodes[-1],
        "envsteps": int(episodes[-1].sum()),
        "seconds": float(seconds.max()),
    }


def record_video(
    game, groups: list[PolicyGroup], path: Path, fps: float = 50, seed: int | None = None
) -> Path:
    """One greedy episode of env 0 of ``game`` (built with render_mode="rgb_array") as a video file.

    A ``path`` ending in .gif or .mp4 (needs imageio-ffmpeg) gets that format; any other gets the
    suffix .mp4 when imageio's ffmpeg plugin is installed, else .gif. ``seed`` seeds the episode.
    """
    from gpu_envs.games.tag.rendering import VIDEO_SUFFIXES, save_animation

    if path.suffix.lower() not in VIDEO_SUFFIXES:
        path = path.with_suffix(".mp4" if importlib.util.find_spec("imageio_ffmpeg") else ".gif")
    device = game.active.device
    actions = torch.zeros(
        (game.num_envs, game.num_agents, len(game.action_nvec)),
        dtype=action_dtype(game.action_nvec),
        device=device,
    )
    obs = game.reset(seed)
    frames = [game.render()]
    for _ in range(game.episode_length):
        obs, _, terminated, truncated, _ = greedy_step(game, groups, obs, actions)
        frames.append(game.render())
        if bool((terminated | truncated)[0]):
            break
    return save_animation(frames, path, fps)
