"""Greedy evaluation on separate envs: one episode per env, every policy taking its argmax actions.

- ``Evaluator``: the trainer's periodic evaluation of its live policies.
- ``load_trained_game(path, num_envs)``: a checkpoint's env and trained policies, ready to play.
- ``evaluate_checkpoint(path, episodes, seed)``: greedy mean return of every policy of a checkpoint.
- ``record_video(game, groups, path)``: one greedy episode as a GIF or MP4.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from gpu_envs import devices
from gpu_envs.runs.checkpoint import CheckpointError, load_checkpoint
from gpu_envs.runs.config import ConfigError, RunConfig
from gpu_envs.trainers.games import make_game
from gpu_envs.trainers.policy import action_dtype, greedy_actions, network_from_checkpoint
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


def load_trained_game(
    path: str | Path,
    num_envs: int,
    device: str | torch.device = "cpu",
    *,
    game: str | None = None,
    render_mode: str | None = None,
):
    """``(env, groups)``: ``num_envs`` envs of a trainer checkpoint's game (its run's env
    parameters, on ``device``) and its trained policies (one ``PolicyGroup`` each) on their agents,
    in eval mode.

    ``game`` ("cartpole", "tag"): the game the checkpoint must be of. Raises ``CheckpointError``
    when the file is missing, damaged, of another game, or its networks do not fit its config.
    """
    path = Path(path)
    state = load_checkpoint(path)
    try:
        config = RunConfig.from_dict(state["config"])
    except ConfigError as error:
        raise CheckpointError(f"checkpoint {path}: its run config does not load: {error}") from None
    if game is not None and config.game != game:
        raise CheckpointError(
            f"checkpoint {path} is of a {config.game} run ({config.name!r}), not of {game}"
        )
    device = devices.resolve_device(device)
    env = make_game(config.name, num_envs, device, config.env, render_mode)
    agent_map = env.default_agent_map(list(state["policies"]))
    groups = []
    for tag in state["policies"]:
        network = network_from_checkpoint(path, state, tag).to(device)
        agents = torch.tensor(agent_map[tag], device=device)
        groups.append(
            PolicyGroup(tag, config.policy[tag], network, network, None, agents, len(agents))
        )
    return env, groups


@dataclass(frozen=True)
class ReturnReport:
    """Greedy episode returns of every policy of a checkpoint (episode ``i`` from seed
    ``seed + i``)."""

    checkpoint: str
    seed: int
    returns: dict[str, list[float]]

    @property
    def episodes(self) -> int:
        return len(next(iter(self.returns.values())))

    def mean(self, tag: str) -> float:
        return statistics.fmean(self.returns[tag])

    def stderr(self, tag: str) -> float:
        """Standard error of the mean return (NaN for one episode)."""
        values = self.returns[tag]
        return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        return {
            "checkpoint": self.checkpoint,
            "episodes": self.episodes,
            "seed": self.seed,
            "policies": {
                tag: {"mean": self.mean(tag), "stderr": self.stderr(tag), "returns": values}
                for tag, values in self.returns.items()
            },
        }


def evaluate_checkpoint(
    path: str | Path,
    *,
    episodes: int = 100,
    seed: int = 0,
    device: str | torch.device = "cpu",
    game: str | None = None,
) -> ReturnReport:
    """Greedy returns of ``episodes`` episodes (one per env, env ``i`` seeded ``seed + i``) of a
    checkpoint."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    env, groups = load_trained_game(path, episodes, device, game=game)
    try:
        evaluator = Evaluator(env, groups, seed)
        result = evaluator.run()
    finally:
        env.close()
    return ReturnReport(
        str(path), seed, {tag: values.tolist() for tag, values in result["returns"].items()}
    )


def record_video(
    game, groups: list[PolicyGroup], path: Path, fps: float = 50, seed: int | None = None
) -> Path:
    """One greedy episode of env 0 of ``game`` (built with render_mode="rgb_array") as a video file.

    A ``path`` ending in .gif or .mp4 (needs imageio-ffmpeg) gets that format; any other gets the
    suffix .mp4 when imageio's ffmpeg plugin is installed, else .gif. ``seed`` seeds the episode.
    """
    from gpu_envs.tag_rendering import VIDEO_SUFFIXES, save_animation

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
