"""Tag (continuous arena) as a batched multi-agent env: ``num_envs`` games stepped together.

The game is the one of SPEC-tag.md (WarpDrive's ``TagContinuous`` with its races fixed): taggers
(ids ``0..num_taggers-1``) chase runners on an [0, L] x [0, L] plane; each agent picks an
acceleration index and a turn index per step. The step runs as the kernels of
``gpu_envs.kernels.tag_*`` on the CPU (njit, parallel over envs) or a CUDA GPU (one block per env,
one thread per agent). Tensors in, tensors out, all on ``device``: observations
[num_envs, N, obs_dim], rewards [num_envs, N], terminated/truncated [num_envs].

Decisions where the SPEC leaves room (also in the docs):

- ``reset_mode="fixed"``: the shared start state is what env 0 of the seed would draw for its first
  episode (stream ``seed``, episode 0); ``reset(seed=s)`` redraws it from ``s``.
- ``starting_location_x/_y`` must lie in [0, L] and ``starting_directions`` in [0, 2pi]; each
  replaces its own draw in both reset modes.
- Nearness (partial observation, nearest tagger) is ranked by the float32 squared distance
  ``dx*dx + dy*dy``; equal values go to the lower id. The tag test compares the float32 distance
  (its sqrt taken in float64 and rounded) with the margin.
- A tagger's reward adds ``count * tag_reward_for_tagger`` once for the ``count`` runners it tagged.
- An agent out of the game in full-observation mode keeps its own type in the observe_self block
  (the other four entries are 0), as it keeps the type blocks; in partial mode everything is 0.
- A tagged runner that exits keeps the heading it had; its speed and acceleration become 0 at once
  and its heading 0 on the next step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_envs import devices
from gpu_envs.kernels import tag_logic as logic
from gpu_envs.kernels.tag_buffers import TagBuffers, buffer_shapes
from gpu_envs.tag_params import TagParams, is_int
from gpu_envs.validation import (AUTORESET_CODES, as_action_tensor, as_reset_mask, check_all_reset,
                                  check_positive_int, parse_autoreset_mode, per_env_seeds)

_TORCH_DTYPES = {
    np.dtype(np.float32): torch.float32, np.dtype(np.bool_): torch.bool,
    np.dtype(np.int32): torch.int32, np.dtype(np.uint64): torch.int64,
}
_STATE_KEYS = ("x", "y", "heading", "speed", "acceleration", "active", "t")
TEAMS = ("tagger", "runner")


# ------------------------------------------------------------------------------------- the env
class TagEnv:
    """``num_envs`` games of Tag stepped together on ``device`` (see the module docstring).

    Args:
        num_envs: number of games.
        device: "cpu", "cuda", "cuda:N" or "auto".
        autoreset_mode: NEXT_STEP (default: the step after a game ends resets it, ignores its
            actions and gives reward 0), SAME_STEP (the ending step resets at once and puts the last
            observation in ``info["final_obs"]``) or DISABLED (reset finished games yourself with
            ``reset(options={"reset_mask": mask})``).
        validate_actions: check actions before each step (on CUDA one host synchronisation). When
            off, an out-of-range index acts as 0 (no change) in the kernel, which sets
            ``action_error``; on the CPU the step then raises.
        render_mode: None or "rgb_array".
        **params: the SPEC-tag.md parameters by name (see :class:`TagParams`).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(self, num_envs: int = 1, device: str | torch.device = "cpu", *,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 validate_actions: bool = True, render_mode: str | None = None, **params: Any):
        self.params = TagParams(**params)
        p = self.params
        self.num_envs = check_positive_int(num_envs, "num_envs")
        self.device = devices.resolve_device(device)
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.validate_actions = bool(validate_actions)

        self.num_taggers, self.num_runners, self.num_agents = p.num_taggers, p.num_runners, p.num_agents
        self.episode_length = p.episode_length
        self.taggers = list(range(p.num_taggers))
        self.runners = list(range(p.num_taggers, p.num_agents))
        self.agent_names = [f"tagger_{i}" for i in range(p.num_taggers)] + \
                           [f"runner_{i}" for i in range(p.num_runners)]
        self.team_slices = {"tagger": slice(0, p.num_taggers), "runner": slice(p.num_taggers, p.num_agents)}
        self.obs_dim = logic.observation_size(p.num_agents, p.use_full_observation,
                                              p.num_other_agents_observed, p.observe_self)
        self.action_nvec = (p.num_acceleration_levels + 1, p.num_turn_levels + 1)

        self._driver = self._load_driver()
        self._tensors = self._allocate()
        self._views = TagBuffers(*[
            devices.as_uint64_view(t) if name in ("episode", "env_seed") else devices.kernel_view(t)
            for name, t in zip(TagBuffers._fields, self._tensors)
        ])
        self._actions = torch.zeros((self.num_envs, p.num_agents, 2), dtype=torch.int64, device=self.device)
        self._actions_view = devices.kernel_view(self._actions)
        fc, ic = logic.make_consts(p)
        self._start = np.zeros((3, p.num_agents), dtype=np.float32)
        self._start_given = np.zeros(3, dtype=np.bool_)
        for q, values in enumerate((p.starting_location_x, p.starting_location_y, p.starting_directions)):
            if values is not None:
                self._start[q] = values
                self._start_given[q] = True
        self._consts = self._to_kernel(fc, ic,
                                       logic.action_levels(p.min_acceleration, p.max_acceleration,
                                                           p.num_acceleration_levels),
                                       logic.action_levels(p.min_turn, p.max_turn, p.num_turn_levels))
        self._fc = fc
        self._start_arrays = self._to_kernel(self._start, self._start_given)
        self._entropy_seed = int(np.random.SeedSequence().entropy % (2**62))
        self._seeded = False
        self._is_reset = False

    # ----------------------------------------------------------------------------- set-up
    def _load_driver(self):
        if self.device.type == "cpu":
            from gpu_envs.kernels import tag_cpu

            return tag_cpu
        from gpu_envs.kernels import tag_cuda

        tag_cuda.check_fits(self.num_agents)
        return tag_cuda

    def _allocate(self) -> TagBuffers:
        scratch_rows = 1 if self.device.type == "cpu" else self.num_agents
        shapes = buffer_shapes(self.num_envs, self.num_agents, self.obs_dim,
                               self.params.num_other_agents_observed, scratch_rows)
        return TagBuffers(**{
            name: torch.zeros(shape, dtype=_TORCH_DTYPES[dtype], device=self.device)
            for name, (shape, dtype) in shapes.items()
        })

    def _to_kernel(self, *arrays: np.ndarray) -> tuple:
        """The arrays as the driver takes them: NumPy on the CPU, device copies on CUDA."""
        if self.device.type == "cpu":
            return arrays
        from numba import cuda

        return tuple(cuda.to_device(a) for a in arrays)

    def _stream_kwargs(self) -> dict:
        return {} if self.device.type == "cpu" else {"stream": devices.launch_stream(self.device)}

    # ----------------------------------------------------------------------------- live state
    @property
    def state(self) -> dict[str, torch.Tensor]:
        """Live state tensors: x, y, heading, speed, acceleration [E, N] float32, active [E, N]
        bool, t [E] int32. Writes go to the envs."""
        return {key: getattr(self._tensors, key) for key in _STATE_KEYS}

    @property
    def active(self) -> torch.Tensor:
        """[E, N] bool, live: the agent is in the game."""
        return self._tensors.active

    @property
    def tag_count(self) -> torch.Tensor:
        """[E, N] int32, live: tags of the last step (tagger: runners it tagged; runner: 1 if tagged)."""
        return self._tensors.tag_count

    @property
    def action_error(self) -> torch.Tensor:
        """[E] bool, live and sticky: an out-of-range action index reached the kernel (only possible
        with validate_actions=False); clear it with ``action_error.zero_()``."""
        return self._tensors.action_error

    def team_view(self, tensor: torch.Tensor, team: str) -> torch.Tensor:
        """``tensor[:, team_slices[team]]``: the team's agents of a [E, N, ...] tensor (a view)."""
        if team not in self.team_slices:
            raise ValueError(f"team must be one of {TEAMS}, got {team!r}")
        return tensor[:, self.team_slices[team]]

    # ----------------------------------------------------------------------------- API
    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        """Reset all games, or those in ``options["reset_mask"]`` ([E] bool).

        ``seed=s`` seeds game ``i`` with ``s + i`` (a sequence gives one seed per game); without a
        seed, the first reset uses the ``seed`` parameter (or fresh entropy). Game ``i``'s start
        states depend only on its own seed and episode count, not on ``num_envs``.
        Returns ``(obs, {"active": [E, N] bool})``.
        """
        options = dict(options or {})
        unknown = set(options) - {"reset_mask"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}: allowed reset_mask")
        if "reset_mask" in options:
            mask = as_reset_mask(options["reset_mask"], self.num_envs, self.device)
        else:
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        if seed is None and not self._seeded:
            seed = self._entropy_seed if self.params.seed is None else self.params.seed
        if seed is not None:
            self._seed(mask, seed)
        fc, ic, _, _ = self._consts
        start, start_given = self._start_arrays
        self._driver.reset(self._views, devices.kernel_view(mask), start, start_given, fc, ic,
                           **self._stream_kwargs())
        self._tensors.has_final_obs.masked_fill_(mask, False)
        self._is_reset = True
        return devices.fresh_copy(self._tensors.obs), {"active": devices.fresh_copy(self._tensors.active)}

    def _seed(self, mask: torch.Tensor, seed) -> None:
        seeds = per_env_seeds(seed, self.num_envs, self.device, "game")
        self._tensors.env_seed.copy_(torch.where(mask, seeds, self._tensors.env_seed))
        self._tensors.episode.masked_fill_(mask, 0)
        self._seeded = True
        if self.params.reset_mode == "fixed":
            self._draw_fixed_start(int(seeds[0]))

    def _draw_fixed_start(self, seed: int) -> None:
        """``reset_mode="fixed"``: one start state for every game, drawn from stream ``seed``."""
        from gpu_envs.kernels.tag_cpu import draw_start_state

        drawn = draw_start_state(seed, self.num_agents, self._fc)
        given = self._start_given.copy()
        self._start[~given] = drawn[~given]
        self._start_arrays = self._to_kernel(self._start, np.ones(3, dtype=np.bool_))

    def step(self, actions):
        """Advance every game by one step; ``actions`` is an integer [E, N, 2] tensor/array of
        (acceleration index, turn index). Returns ``(obs, rewards, terminated, truncated, info)``
        with ``info["active"]`` [E, N] (and ``final_obs``, ``_final_obs``, ``final_active`` in
        SAME_STEP mode)."""
        if not self._is_reset:
            raise RuntimeError("call reset() before step()")
        shape = (self.num_envs, self.num_agents, 2)
        if self.validate_actions:
            actions = as_action_tensor(actions, shape, self.device, [v - 1 for v in self.action_nvec])
            if self.autoreset_mode == AutoresetMode.DISABLED:
                check_all_reset(self._tensors.needs_reset, "game")
        else:
            actions = torch.as_tensor(actions, device=self.device)
        self._actions.copy_(actions)
        fc, ic, acc_table, turn_table = self._consts
        start, start_given = self._start_arrays
        self._driver.step(self._views, self._actions_view, acc_table, turn_table, start, start_given,
                          fc, ic, AUTORESET_CODES[self.autoreset_mode], **self._stream_kwargs())
        if not self.validate_actions and self.device.type == "cpu":
            self._raise_on_action_error()
        t = self._tensors
        info: dict[str, Any] = {"active": devices.fresh_copy(t.active)}
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            info.update(final_obs=devices.fresh_copy(t.final_obs), _final_obs=devices.fresh_copy(t.has_final_obs),
                        final_active=devices.fresh_copy(t.final_active))
        return devices.fresh_copy(t.obs), devices.fresh_copy(t.rewards), devices.fresh_copy(t.terminated), devices.fresh_copy(t.truncated), info

    def _raise_on_action_error(self) -> None:
        errors = self._tensors.action_error
        if bool(errors.any()):
            ids = errors.nonzero().flatten()[:8].tolist()
            errors.zero_()
            raise ValueError(
                f"actions of game(s) {ids} had an index outside 0..{[v - 1 for v in self.action_nvec]} "
                "(validate_actions=False); the kernel applied 'no change' for it"
            )

    def fetch_episode_states(self, policy: Callable[[torch.Tensor, "TagEnv"], Any] | None = None, *,
                             seed: int = 0, steps: int | None = None) -> dict[str, Any]:
        """Play one game with this env's parameters (in a private 1-game env) and return its trajectory.

        ``policy(obs, env) -> actions`` gets obs [1, N, obs_dim] and returns [1, N, 2] indices; None
        plays uniform random actions drawn from a generator seeded with ``seed``, which also seeds
        the start state. Stops at the end of the game or after ``steps`` steps.

        Returns NumPy arrays for S steps played: ``x, y, heading, speed, acceleration`` [S+1, N]
        float32, ``active`` [S+1, N] bool, ``t`` [S+1] int32, ``rewards`` [S, N] float32, ``actions``
        [S, N, 2] int64; and ``num_taggers``, ``grid_length``, ``episode_length``.
        """
        if steps is not None and (not is_int(steps) or steps < 0):
            raise ValueError(f"steps must be an int >= 0 or None, got {steps!r}")
        env = TagEnv(1, self.device, autoreset_mode=AutoresetMode.DISABLED,
                     **dataclasses.asdict(self.params))
        generator = torch.Generator().manual_seed(int(seed))
        nvec = torch.tensor(self.action_nvec, dtype=torch.int64)
        frames: dict[str, list] = {key: [] for key in (*_STATE_KEYS, "rewards", "actions")}

        def snapshot() -> None:
            for key, tensor in env.state.items():
                frames[key].append(tensor[0].cpu().numpy().copy())

        obs, _ = env.reset(seed=seed)
        snapshot()
        limit = self.episode_length if steps is None else min(steps, self.episode_length)
        for _ in range(limit):
            if policy is None:
                actions = (torch.rand((1, self.num_agents, 2), generator=generator) * nvec).long()
            else:
                actions = policy(obs, env)
            actions = torch.as_tensor(actions).to(torch.int64)
            obs, rewards, terminated, _, _ = env.step(actions)
            snapshot()
            frames["rewards"].append(rewards[0].cpu().numpy())
            frames["actions"].append(actions[0].cpu().numpy())
            if bool(terminated[0]):
                break
        env.close()
        n = self.num_agents
        result: dict[str, Any] = {key: np.stack(rows) for key, rows in frames.items() if rows}
        result.setdefault("rewards", np.zeros((0, n), np.float32))
        result.setdefault("actions", np.zeros((0, n, 2), np.int64))
        result.update(num_taggers=self.num_taggers, grid_length=self.params.grid_length,
                      episode_length=self.episode_length)
        return result

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One RGB frame (H, W, 3 uint8) per game when ``render_mode="rgb_array"``."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; pass render_mode='rgb_array'")
            return None
        from gpu_envs.tag_rendering import render_tag_frames

        return render_tag_frames(self.state, self.num_taggers, self.params.grid_length, self.episode_length)

    def close(self) -> None:
        """Release the buffers."""
        self._views = self._tensors = None
