"""Tag matchups: trained and random teams against each other, scored by runners tagged per episode.

The Tag learning benchmark's targets are met when trained taggers against random runners tag at
least ``TAGGER_TARGET`` (1.5) times as many runners per episode as random taggers do, and trained
runners against random taggers are tagged at most ``RUNNER_TARGET`` (2/3) times as often.

- ``load_tag_checkpoint(path, device)``: the env parameters and the ActorCritic of every policy of a
  trainer checkpoint, rebuilt from its config and weights.
- ``load_policy(path)``: ``policy(obs, env) -> actions`` playing every team with its trained policy.
- ``evaluate_matchups(path, episodes, seed)``: the four matchups and the two ratios.

Every matchup plays the same start states (games seeded ``seed + i``) and draws its random and
sampled actions from a ``torch.Generator`` seeded with ``seed``, on the env's device.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from gpu_envs.engine import devices
from gpu_envs.games.tag.env import TEAMS, TagEnv
from gpu_envs.runs.checkpoint import CheckpointError, load_checkpoint
from gpu_envs.runs.config import ConfigError, game_of
from gpu_envs.trainers.evaluation import CHECK_EVERY
from gpu_envs.trainers.policy import ActorCritic, greedy_actions, network_from_checkpoint

TAGGER_TARGET = 1.5
RUNNER_TARGET = 2 / 3
KINDS = ("random", "trained")
#: (taggers, runners) of each matchup, in report order.
MATCHUPS = (
    ("random", "random"),
    ("trained", "random"),
    ("random", "trained"),
    ("trained", "trained"),
)


@dataclass(frozen=True)
class TagCheckpoint:
    """A Tag trainer checkpoint: its env parameters and its policies' networks (eval mode)."""

    path: Path
    env_params: dict
    networks: dict[str, ActorCritic]
    device: torch.device

    def team_network(self, team: str) -> ActorCritic:
        """The network playing ``team`` ("tagger" or "runner"): its own, or the one shared
        policy."""
        if team in self.networks:
            return self.networks[team]
        if len(self.networks) == 1:
            return next(iter(self.networks.values()))
        raise CheckpointError(
            f"checkpoint {self.path} holds policies {sorted(self.networks)}, none for the {team}s"
        )


def load_tag_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> TagCheckpoint:
    """Read a Tag trainer checkpoint and rebuild its networks on ``device`` (``CheckpointError`` if
    the file is missing, damaged, or not of a Tag run)."""
    path = Path(path)
    state = load_checkpoint(path)
    config = state["config"]
    try:
        game = game_of(str(config["name"]))
    except ConfigError as error:
        raise CheckpointError(f"checkpoint {path}: {error}") from None
    if game != "tag":
        raise CheckpointError(
            f"checkpoint {path} is of a {game} run ({config['name']!r}), not of Tag"
        )
    device = devices.resolve_device(device)
    networks = {
        tag: network_from_checkpoint(path, state, tag).to(device) for tag in state["policies"]
    }
    return TagCheckpoint(path, dict(config["env"]), networks, device)


class TeamPolicy:
    """``policy(obs, env) -> actions`` for a TagEnv: each team plays its network (sampled from
    its categorical heads, or their argmax when ``greedy``), or uniform random actions where it has
    none.

    Args:
        networks: "tagger" and "runner" -> ActorCritic, or None for random play.
        generator: draws the random and sampled actions; on the device of the observations.
        greedy: argmax actions for the networks instead of samples.
        env_params: the TagEnv parameters the networks were trained on (for building envs).
    """

    def __init__(
        self,
        networks: Mapping[str, ActorCritic | None],
        generator: torch.Generator,
        *,
        greedy: bool = False,
        env_params: Mapping | None = None,
    ):
        self.networks = {team: networks.get(team) for team in TEAMS}
        self.generator, self.greedy = generator, greedy
        self.env_params = dict(env_params or {})

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor, env: TagEnv) -> torch.Tensor:
        """Actions [E, N, 2] int64 for observations [E, N, obs_dim]."""
        nvec = tuple(env.action_nvec)
        actions = torch.empty((*obs.shape[:2], len(nvec)), dtype=torch.int64, device=obs.device)
        for team in TEAMS:
            team_obs = env.team_view(obs, team)
            network = self.networks[team]
            team_actions = (
                self._random(team_obs.shape[:2], nvec, obs.device)
                if network is None
                else self._act(network, team_obs, nvec)
            )
            env.team_view(actions, team).copy_(team_actions)
        return actions

    def _random(self, shape: torch.Size, nvec: Sequence[int], device: torch.device) -> torch.Tensor:
        return torch.stack(
            [torch.randint(n, shape, generator=self.generator, device=device) for n in nvec], -1
        )

    def _act(self, network: ActorCritic, obs: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
        if obs.shape[-1] != network.obs_dim or tuple(nvec) != network.action_nvec:
            raise ValueError(
                f"the policy takes observations of size {network.obs_dim} and actions "
                f"{list(network.action_nvec)}, the env has {obs.shape[-1]} and {list(nvec)}: "
                "play it on the env parameters it was trained with"
            )
        logits, _ = network(obs.reshape(-1, obs.shape[-1]))
        if self.greedy:
            flat = greedy_actions(logits, nvec)
        else:
            flat = torch.stack(
                [
                    torch.multinomial(torch.softmax(part, -1), 1, generator=self.generator).squeeze(
                        -1
                    )
                    for part in logits.split(nvec, dim=-1)
                ],
                -1,
            )
        return flat.view(*obs.shape[:2], len(nvec))


def load_policy(
    path: str | Path, *, device: str | torch.device = "cpu", greedy: bool = False, seed: int = 0
) -> TeamPolicy:
    """``policy(obs, env) -> actions`` playing every Tag team with its trained policy of the
    checkpoint at ``path``; ``policy.env_params`` are the env parameters of its run."""
    checkpoint = load_tag_checkpoint(path, device)
    return team_policy(checkpoint, ("trained", "trained"), seed, greedy)


def team_policy(
    checkpoint: TagCheckpoint, kinds: tuple[str, str], seed: int, greedy: bool = False
) -> TeamPolicy:
    """The policy of a matchup: ``kinds`` ("trained" or "random") of the taggers and the runners."""
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"a team plays one of {KINDS}, got {kind!r}")
    networks = {
        team: checkpoint.team_network(team) if kind == "trained" else None
        for team, kind in zip(TEAMS, kinds)
    }
    generator = torch.Generator(device=checkpoint.device).manual_seed(seed)
    return TeamPolicy(networks, generator, greedy=greedy, env_params=checkpoint.env_params)


@torch.no_grad()
def count_tags(
    env: TagEnv, policy: Callable[[torch.Tensor, TagEnv], torch.Tensor], seed: int
) -> torch.Tensor:
    """Runners tagged in each game's episode, [E] int64 on ``env.device``.

    Resets every game with ``seed`` and plays ``policy(obs, env)`` until every episode is over.
    ``env`` runs with autoreset DISABLED (and ``validate_actions=False``, so finished games are
    stepped frozen) or NEXT_STEP: steps after a game's end are not counted either way.
    """
    obs, _ = env.reset(seed=seed)
    tags = torch.zeros(env.num_envs, dtype=torch.int64, device=env.device)
    playing = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    for step in range(1, env.episode_length + 1):
        obs, _, terminated, truncated, _ = env.step(policy(obs, env))
        tags += env.team_view(env.tag_count, "runner").sum(-1) * playing
        playing &= ~(terminated | truncated)
        if step % CHECK_EVERY == 0 and not bool(playing.any()):
            break
    return tags


@dataclass(frozen=True)
class MatchupResult:
    """Runners tagged per episode in one matchup."""

    taggers: str
    runners: str
    tags: list[int]

    @property
    def name(self) -> str:
        return f"{self.taggers} taggers vs {self.runners} runners"

    @property
    def mean(self) -> float:
        return statistics.fmean(self.tags)

    @property
    def stderr(self) -> float:
        """Standard error of the mean (NaN for one episode)."""
        if len(self.tags) < 2:
            return math.nan
        return statistics.stdev(self.tags) / math.sqrt(len(self.tags))


@dataclass(frozen=True)
class MatchupReport:
    """The four matchups of a checkpoint and the benchmark's two ratios."""

    checkpoint: str
    episodes: int
    seed: int
    greedy: bool
    results: tuple[MatchupResult, ...]

    def mean(self, taggers: str, runners: str) -> float:
        """Mean runners tagged per episode when ``taggers`` play ``runners``."""
        return next(r.mean for r in self.results if (r.taggers, r.runners) == (taggers, runners))

    @property
    def tagger_ratio(self) -> float:
        """tags(trained taggers vs random runners) / tags(random vs random): target >= 1.5."""
        return _ratio(self.mean("trained", "random"), self.mean("random", "random"))

    @property
    def runner_ratio(self) -> float:
        """tags(random taggers vs trained runners) / tags(random vs random): target <= 2/3."""
        return _ratio(self.mean("random", "trained"), self.mean("random", "random"))

    @property
    def tagger_pass(self) -> bool:
        """The tagger ratio meets the learning benchmark's target."""
        return self.tagger_ratio >= TAGGER_TARGET

    @property
    def runner_pass(self) -> bool:
        """The runner ratio meets the learning benchmark's target."""
        return self.runner_ratio <= RUNNER_TARGET

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        return {
            "checkpoint": self.checkpoint,
            "episodes": self.episodes,
            "seed": self.seed,
            "greedy": self.greedy,
            "matchups": [
                {
                    "taggers": r.taggers,
                    "runners": r.runners,
                    "mean": r.mean,
                    "stderr": r.stderr,
                    "tags": r.tags,
                }
                for r in self.results
            ],
            "tagger_ratio": {
                "value": self.tagger_ratio,
                "target": TAGGER_TARGET,
                "pass": self.tagger_pass,
            },
            "runner_ratio": {
                "value": self.runner_ratio,
                "target": RUNNER_TARGET,
                "pass": self.runner_pass,
            },
        }


def _ratio(value: float, base: float) -> float:
    return value / base if base else math.nan


def evaluate_matchups(
    path: str | Path,
    *,
    episodes: int = 100,
    seed: int = 0,
    greedy: bool = False,
    device: str | torch.device = "cpu",
) -> MatchupReport:
    """Play ``episodes`` episodes (one game each) of every matchup on the checkpoint's Tag env."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    checkpoint = load_tag_checkpoint(path, device)
    env = TagEnv(
        episodes,
        checkpoint.device,
        autoreset_mode="disabled",
        validate_actions=False,
        **checkpoint.env_params,
    )
    try:
        counts = [
            count_tags(env, team_policy(checkpoint, kinds, seed, greedy), seed)
            for kinds in MATCHUPS
        ]
    finally:
        env.close()
    results = tuple(
        MatchupResult(taggers, runners, tags.tolist())
        for (taggers, runners), tags in zip(MATCHUPS, counts)
    )
    return MatchupReport(str(path), episodes, seed, greedy, results)
