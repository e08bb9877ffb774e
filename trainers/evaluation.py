"""Greedy evaluation on separate envs: one episode per env, every policy taking its argmax actions.

- ``Evaluator``: the trainer's periodic evaluation of its live policies.
- ``record_video(game, groups, path)``: one greedy episode as a GIF or MP4.

Scoring a saved checkpoint (``gpu-envs evaluate``) is ``gpu_envs.trainers.scores``.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import torch

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
    """Runs ``game.num_envs`` greedy episodes (one per env, env ``i`` from seed ``seed + i``, the
    same episodes at every call) and reports each policy's team returns."""

    def __init__(self, game, groups: list[PolicyGroup], seed: int):
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
        self.seed = seed
        self.evaluations = 0

    def run(self) -> dict:
        """``{"returns": {tag: [episodes] tensor}, "lengths": tensor, "envsteps": int,
        "seconds": float}``."""
        start = time.perf_counter()
        self.evaluations += 1
        obs = self.game.reset(self.seed)
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
