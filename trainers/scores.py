"""A saved checkpoint's policies played back and scored (``gpu-envs evaluate``, ``render``).

- ``load_trained_game(path, num_envs)``: a checkpoint's env and trained policies, ready to play.
- ``evaluate_checkpoint(path, episodes, seed)``: greedy mean return of every policy of a checkpoint,
  with the trainer's own ``Evaluator`` (the figure its evaluations logged).
- ``returns_on(env_id, path, ...)``: the same greedy policy on a ``gym.make`` env, one episode at a
  time (gymnasium's own env: ``gpu-envs evaluate GAME --on-gymnasium``).

Tag's teams against random ones: ``gpu_envs.trainers.matchups``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import torch

from gpu_envs.engine import devices
from gpu_envs.runs.checkpoint import CheckpointError, load_checkpoint
from gpu_envs.runs.config import ConfigError, RunConfig
from gpu_envs.trainers.evaluation import Evaluator
from gpu_envs.trainers.game_faces import make_game
from gpu_envs.trainers.policy import greedy_actions, network_from_checkpoint
from gpu_envs.trainers.rollout import PolicyGroup


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


def returns_on(
    env_id: str, checkpoint: str | Path, game: str, episodes: int, seed: int
) -> ReturnReport:
    """A ``ReturnReport``: a single-agent checkpoint's greedy policy playing ``gym.make(env_id)``
    (episode ``i`` reset with seed ``seed + i``, the run's ``max_episode_steps``) on the CPU, the
    observations and actions passed through the trainer's game face as in training."""
    face, (group,) = load_trained_game(checkpoint, 1, "cpu", game=game)
    env = gym.make(env_id, max_episode_steps=face.episode_length)
    returns = []
    with torch.no_grad():
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            total, done = 0.0, False
            while not done:
                policy_obs = face.policy_obs(torch.as_tensor(obs, dtype=torch.float32)[None])
                logits, _ = group.module(policy_obs[:, 0])
                action = face.env_actions(greedy_actions(logits, face.action_nvec)[:, None])[0]
                obs, reward, terminated, truncated, _ = env.step(action.numpy())
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    env.close()
    face.close()
    return ReturnReport(str(checkpoint), seed, {group.tag: returns})
