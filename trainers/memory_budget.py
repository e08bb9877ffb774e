"""A run's memory, estimated from its config and checked before anything large is allocated.

``check_run_memory`` sums the largest tensors a rank of a run keeps, by part, each with the config
fields that size it:

- env buffers: the game's kernel buffers (``KernelEnv.buffer_layout``, measured on a one-env
  probe and scaled to the rank's envs; an env from outside the engine counts its observations);
- rollout buffers: each policy's ``RolloutBuffer`` [T, E, n, ...], the collector's per-step
  outputs and episode snapshots, the learner's per-sample temporaries (GAE, returns, normalised
  advantages, weights), and a minibatch's activations with their gradients (all of
  ``trainer.train_batch_size`` in one minibatch for A2C);
- networks: each policy's weights, with gradients and Adam's two moments when trained (and DDP's
  gradient buckets), and the frozen opponents' snapshots;
- evaluation envs: the evaluator's share of ``evaluation.num_episodes`` envs, its returns and
  the activations of a forward pass over them.

The sum is compared with the memory the device has left (``devices.available_memory``; the
processes of a CPU run on one machine share its memory), and a run that does not fit is refused
with one ``ConfigError`` naming the fields to lower and the estimated and available bytes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

from gpu_envs.engine import devices
from gpu_envs.engine.kernel_env import KernelEnv
from gpu_envs.runs.config import ConfigError, PolicyConfig, RunConfig
from gpu_envs.trainers.evaluation import episode_shares
from gpu_envs.trainers.game_faces import make_game
from gpu_envs.trainers.policy import ActorCritic, action_dtype

_FLOAT = 4  # bytes of a float32
#: Per-sample float32 temporaries of an update: GAE's deltas, trace, following values and kept
#: values, the advantages and returns, the normalised advantages, the minibatch weights and the
#: minibatch order (an int64).
_UPDATE_TEMPORARIES = 10
#: Per-sample float32 values of the loss kept for the backward pass besides the network's
#: activations: log-probabilities, entropies, ratios, surrogates, value errors.
_LOSS_TERMS = 24


@dataclass(frozen=True)
class Part:
    """One part of a run's memory: its size in bytes and the config fields that lower it."""

    name: str
    size: int
    fields: tuple[str, ...]


def check_run_memory(
    config: RunConfig,
    device: torch.device,
    world_size: int = 1,
    rank: int = 0,
    game=None,
    agent_map: dict[str, list[int]] | None = None,
) -> None:
    """Refuse (``ConfigError``) a run whose rank ``rank`` of ``world_size`` would not fit in the
    memory ``device`` has left. ``game``: the trainer's game when built already (its envs are
    allocated then and not counted), else a one-env probe of it is built and closed;
    ``agent_map``: the policies' agents (None: the game's default)."""
    free = devices.available_memory(device)
    if free is None:  # nothing to read: the allocator decides
        return
    probe = game if game is not None else make_game(config.name, 1, device, config.env)
    try:
        agent_map = agent_map or probe.default_agent_map(list(config.policy))
        parts = estimate(config, probe, agent_map, world_size, rank, count_envs=game is None)
    finally:
        if game is None:
            probe.close()
    sharing = max(1, world_size // config.trainer.num_nodes) if device.type == "cpu" else 1
    total = sum(part.size for part in parts)
    needed = sharing * total
    if needed <= free:
        return
    # the parts worth lowering (1% of the total or more), largest first
    largest = sorted((p for p in parts if 100 * p.size >= total), key=lambda p: -p.size)
    each = f" ({sharing} processes on this machine)" if sharing > 1 else ""
    raise ConfigError(
        f"{largest[0].fields[0]}: the run needs about {_size(needed)} of memory on {device}"
        f"{each}, but only {_size(free)} are free; lower "
        + "; ".join(f"{' or '.join(p.fields)} ({p.name}: {_size(p.size)})" for p in largest)
    )


def estimate(
    config: RunConfig,
    game,
    agent_map: dict[str, list[int]],
    world_size: int = 1,
    rank: int = 0,
    count_envs: bool = True,
) -> list[Part]:
    """The parts of one rank's memory, largest tensors only; ``game`` is the trainer's game or a
    probe of it with the same env settings (any number of envs), ``agent_map`` the policies'
    agents; ``count_envs``: count the training envs."""
    tc = config.trainer
    envs, steps = tc.envs_per_rank(world_size), tc.num_steps
    agents, obs_dim, nvec = game.num_agents, game.obs_dim, game.action_nvec
    heads, action_size = len(nvec), torch.empty((), dtype=action_dtype(nvec)).element_size()
    per_env = _env_bytes(game)
    # the collector's per-step outputs (flags, rewards, float64 episode snapshots), its actions
    rollout = steps * envs * (3 + agents * (2 + _FLOAT + 8) + 8) + envs * agents * heads * 8
    networks = 0
    for tag, cfg in config.policy.items():
        samples = steps * envs * len(agent_map[tag])
        per_sample = obs_dim * _FLOAT + heads * action_size + (6 + _UPDATE_TEMPORARIES) * _FLOAT
        minibatch = samples if cfg.algorithm == "A2C" else -(-samples // cfg.num_minibatches)
        widths = obs_dim + sum(cfg.model.fc_dims) + 3 * sum(nvec) + heads + _LOSS_TERMS
        # the buffer and the update's temporaries; a minibatch's activations and their gradients
        rollout += samples * per_sample + 2 * minibatch * widths * _FLOAT
        copies = 4 + (world_size > 1) if cfg.to_train else 1  # weights, gradients, Adam's moments
        if config.opponents.share:
            copies += config.opponents.pool_size + 1
        networks += copies * _network_params(obs_dim, nvec, cfg) * _FLOAT
    evaluation = 0
    if config.evaluation.eval_freq:  # the envs, their actions and returns, a forward pass
        eval_envs = episode_shares(config.evaluation.num_episodes, world_size)[rank]
        widest = max(sum(cfg.model.fc_dims) for cfg in config.policy.values())
        forward = (obs_dim + widest + sum(nvec) + 1) * _FLOAT
        evaluation = eval_envs * (per_env + agents * (heads * 8 + 8 + forward) + 8)
    network_fields = tuple(f"policy.{tag}.model.fc_dims" for tag in config.policy)
    if config.opponents.share:
        network_fields += ("opponents.pool_size",)
    return [
        Part("env buffers", envs * per_env if count_envs else 0, ("trainer.num_envs",)),
        Part("rollout buffers", rollout, ("trainer.train_batch_size",)),
        Part("networks", networks, network_fields),
        Part("evaluation envs", evaluation, ("evaluation.num_episodes",)),
    ]


def _env_bytes(game) -> int:
    """Bytes of one env's buffers: the engine's layout per env, else its observations (the
    current and the final one)."""
    env = game.env
    if isinstance(env, KernelEnv):
        layout = env.buffer_layout().values()
        total = sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in layout)
        return -(-total // env.num_envs)
    return 2 * game.num_agents * game.obs_dim * _FLOAT


def _network_params(obs_dim: int, nvec, cfg: PolicyConfig) -> int:
    """Parameters of the policy's network, counted on the meta device (nothing allocated)."""
    with torch.device("meta"):
        network = ActorCritic(obs_dim, nvec, dataclasses.replace(cfg.model, ortho_init=False))
    return sum(parameter.numel() for parameter in network.parameters())


def _size(size: int) -> str:
    return f"{size / 2**30:.2f} GiB ({size:,} bytes)"
