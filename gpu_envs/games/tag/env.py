"""Tag (continuous arena) as a batched multi-agent env: ``num_envs`` games stepped together.

The game is the one of docs/spec-tag.md (WarpDrive's ``TagContinuous`` with its races fixed):
taggers (ids ``0..num_taggers-1``) chase runners on an [0, L] x [0, L] plane; each agent picks an
acceleration index and a turn index per step. The step runs as the kernels of
``gpu_envs.kernels.tag_logic`` on the CPU (njit, parallel over envs) or a CUDA GPU (one block per
env, one thread per agent). Tensors in, tensors out, all on ``device``: observations [num_envs, N,
obs_dim], rewards [num_envs, N], terminated/truncated [num_envs].

Decisions where docs/spec-tag.md leaves room (also in the docs):

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
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_envs.engine import devices
from gpu_envs.engine.kernel_env import KernelEnv
from gpu_envs.engine.validation import as_action_tensor, check_action_layout
from gpu_envs.games import GAMES
from gpu_envs.games.tag.params import TagParams, check_step_cost, is_int
from gpu_envs.kernels import tag_logic as logic

_STATE_KEYS = ("x", "y", "heading", "speed", "acceleration", "active", "t")
TEAMS = ("tagger", "runner")


# ------------------------------------------------------------------------------------- the env
class TagEnv(KernelEnv):
    """``num_envs`` games of Tag stepped together on ``device`` (see the module docstring).

    Batched: every method works on all ``num_envs`` games at once (``reset`` and ``step`` take and
    return tensors with a leading ``num_envs`` axis), so this is not a single-game env and not a
    gymnasium ``VectorEnv``. The single-game faces are PettingZoo's ``gpu_envs.tag_v0`` (one game
    as a ``ParallelEnv``) and the gymnasium ``gpu_envs.games.tag.gym_vector.TagGymVectorEnv``
    (``gym.make_vec``
    of "gpu_envs/Tag-v0": the (game, agent) pairs as single-agent rows).

    Args:
        num_envs: number of games.
        device: "cpu", "cuda", "cuda:N" or "auto".
        autoreset_mode: NEXT_STEP (default: the step after a game ends resets it, ignores its
            actions and gives reward 0), SAME_STEP (the ending step resets at once and puts the last
            observation in ``info["final_obs"]``) or DISABLED (reset finished games yourself with
            ``reset(options={"reset_mask": mask})``).
        validate_actions: check action values before each step (on CUDA one host synchronisation);
            shapes and dtypes are always checked. When off, an out-of-range index acts as 0 (no
            change) in the kernel, which sets ``action_error``; on the CPU the step then raises.
        render_mode: None or "rgb_array".
        **params: the Tag parameters by name (docs/spec-tag.md, Parameters; see
            :class:`~gpu_envs.games.tag.params.TagParams`).
    """

    game = "tag"
    logic = logic
    scratch_buffers = ("knn_idx", "d2_row", "runners_left")
    cuda_shape = "block"
    cuda_shared_slots = logic.SHARED_SLOTS
    #: One Tag env-step is tens of microseconds: threads pay for themselves from two envs on.
    cpu_block_size = 1
    cpu_parallel_min_envs = 2
    env_noun = "game"
    final_outputs = {
        "final_obs": "final_obs",
        "_final_obs": "has_final_obs",
        "final_active": "final_active",
    }
    metadata = {
        "render_modes": ["rgb_array"],
        "render_fps": GAMES["tag"].render_fps,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        validate_actions: bool = True,
        render_mode: str | None = None,
        **params: Any,
    ):
        self.params = TagParams(**params)
        p = self.params
        super().__init__(
            num_envs,
            device,
            autoreset_mode=autoreset_mode,
            render_mode=render_mode,
            validate_actions=validate_actions,
        )
        check_step_cost(p, self.num_envs)
        self.num_taggers, self.num_runners, self.num_agents = (
            p.num_taggers,
            p.num_runners,
            p.num_agents,
        )
        self.episode_length = p.episode_length
        self.taggers = list(range(p.num_taggers))
        self.runners = list(range(p.num_taggers, p.num_agents))
        self.agent_names = [f"tagger_{i}" for i in range(p.num_taggers)] + [
            f"runner_{i}" for i in range(p.num_runners)
        ]
        self.team_slices = {
            "tagger": slice(0, p.num_taggers),
            "runner": slice(p.num_taggers, p.num_agents),
        }
        self.obs_dim = logic.observation_size(
            p.num_agents, p.use_full_observation, p.num_other_agents_observed, p.observe_self
        )
        self.action_nvec = (p.num_acceleration_levels + 1, p.num_turn_levels + 1)
        self.single_action_space = gym.spaces.MultiDiscrete(list(self.action_nvec))
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (self.obs_dim,), np.float32)
        self._float_consts, self._int_consts = logic.make_consts(p)
        self._acc_table = logic.action_levels(
            p.min_acceleration, p.max_acceleration, p.num_acceleration_levels
        )
        self._turn_table = logic.action_levels(p.min_turn, p.max_turn, p.num_turn_levels)
        self._start = np.zeros((3, p.num_agents), dtype=np.float32)
        self._start_given = np.zeros(3, dtype=np.bool_)
        for q, values in enumerate(
            (p.starting_location_x, p.starting_location_y, p.starting_directions)
        ):
            if values is not None:
                self._start[q] = values
                self._start_given[q] = True
        self._user_given = self._start_given.copy()  # the start state the parameters fix
        self._build()

    def buffer_layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Agents' state [E, N], the env's counters [E], outputs, and the partial observation's
        kNN scratch of each worker of an env (one on the CPU; on CUDA one per thread of the env's
        block, at most N): its k neighbour ids (and room for N candidates) and its squared
        distances to all N agents (on CUDA about 8 * N * min(N, 256) bytes per game: 2 GB, not
        8 GB, for 1000 games of 1000 agents)."""
        e, n = self.num_envs, self.num_agents
        f32, flag, i32 = np.dtype(np.float32), np.dtype(np.bool_), np.dtype(np.int32)
        workers = 1 if self.kernel_target == "cpu" else min(n, _block_threads())
        k = self.params.num_other_agents_observed
        row = 1 if self.params.use_full_observation else n
        return {
            "x": ((e, n), f32),
            "y": ((e, n), f32),
            "heading": ((e, n), f32),
            "speed": ((e, n), f32),
            "acceleration": ((e, n), f32),
            "active": ((e, n), flag),
            "t": ((e,), i32),
            "needs_reset": ((e,), flag),
            "episode": ((e,), np.dtype(np.uint64)),
            "env_seed": ((e,), np.dtype(np.uint64)),
            "obs": ((e, n, self.obs_dim), f32),
            "rewards": ((e, n), f32),
            "terminated": ((e,), flag),
            "truncated": ((e,), flag),
            "final_obs": ((e, n, self.obs_dim), f32),
            "final_active": ((e, n), flag),
            "has_final_obs": ((e,), flag),
            "tag_count": ((e, n), i32),
            "action_error": ((e,), flag),
            "knn_idx": ((e, workers, 1 if row == 1 else k + n), i32),
            "d2_row": ((e, workers, row), f32),
            "runners_left": ((e,), i32),
        }

    def constants(self) -> dict[str, np.ndarray]:
        return {
            "acc_table": self._acc_table,
            "turn_table": self._turn_table,
            "start_state": self._start,
            "start_given": self._start_given,
            "float_consts": self._float_consts,
            "int_consts": self._int_consts,
        }

    def action_layout(self) -> tuple[tuple[int, ...], torch.dtype]:
        return (self.num_envs, self.num_agents, 2), torch.int64

    # ----------------------------------------------------------------------------- live state
    @property
    def state(self) -> dict[str, torch.Tensor]:
        """Live state tensors: x, y, heading, speed, acceleration [E, N] float32, active [E, N]
        bool, t [E] int32. Writes go to the envs."""
        return {key: self._tensors[key] for key in _STATE_KEYS}

    @property
    def active(self) -> torch.Tensor:
        """[E, N] bool, live: the agent is in the game."""
        return self._tensors.active

    @property
    def tag_count(self) -> torch.Tensor:
        """[E, N] int32, live: tags of the last step (tagger: runners it tagged; runner: 1 if
        tagged)."""
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

    # ----------------------------------------------------------------------------- engine hooks
    def default_seed(self) -> int:
        """The ``seed`` parameter, else fresh entropy."""
        return self._entropy_seed if self.params.seed is None else self.params.seed

    def seed_envs(self, mask: torch.Tensor, seed) -> torch.Tensor:
        seeds = super().seed_envs(mask, seed)
        if self.params.reset_mode == "fixed":
            self._draw_fixed_start(int(seeds[0]))
        return seeds

    def _draw_fixed_start(self, seed: int) -> None:
        """``reset_mode="fixed"``: one start state for every game, drawn from stream ``seed``."""
        drawn = logic.draw_start_state(seed, self.num_agents, self._float_consts)
        self._start[~self._user_given] = drawn[~self._user_given]
        self._start_given = np.ones(3, dtype=np.bool_)
        self.update_constants()

    def reset_info(self) -> dict[str, Any]:
        return {"active": devices.fresh_copy(self._tensors.active)}

    def step_info(self) -> dict[str, Any]:
        return {"active": devices.fresh_copy(self._tensors.active)}

    def check_actions(self, actions) -> torch.Tensor:
        if self.validate_actions:
            return as_action_tensor(
                actions, self._action_shape, self.device, [v - 1 for v in self.action_nvec]
            )
        return check_action_layout(actions, self._action_shape, self.device)

    def after_step(self) -> None:
        """Without validation on the CPU, report an out-of-range index the kernel met."""
        if self.validate_actions or self.kernel_target != "cpu":
            return
        errors = self._tensors.action_error
        if bool(errors.any()):
            ids = errors.nonzero().flatten()[:8].tolist()
            errors.zero_()
            raise ValueError(
                f"actions of game(s) {ids} had an index outside "
                f"0..{[v - 1 for v in self.action_nvec]} (validate_actions=False); the kernel "
                "applied 'no change' for it"
            )

    def fetch_episode_states(
        self,
        policy: Callable[[torch.Tensor, TagEnv], Any] | None = None,
        *,
        seed: int = 0,
        steps: int | None = None,
    ) -> dict[str, Any]:
        """Play one game with this env's parameters (in a private 1-game env) and return its
        trajectory.

        ``policy(obs, env) -> actions`` gets obs [1, N, obs_dim] and returns [1, N, 2] indices; None
        plays uniform random actions drawn from a generator seeded with ``seed``, which also seeds
        the start state. Stops at the end of the game or after ``steps`` steps.

        Returns NumPy arrays for S steps played: ``x, y, heading, speed, acceleration`` [S+1, N]
        float32, ``active`` [S+1, N] bool, ``t`` [S+1] int32, ``rewards`` [S, N] float32,
        ``actions``
        [S, N, 2] int64; and ``num_taggers``, ``grid_length``, ``episode_length``.
        """
        if steps is not None and (not is_int(steps) or steps < 0):
            raise ValueError(f"steps must be an int >= 0 or None, got {steps!r}")
        env = TagEnv(
            1, self.device, autoreset_mode=AutoresetMode.DISABLED, **dataclasses.asdict(self.params)
        )
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
        result.update(
            num_taggers=self.num_taggers,
            grid_length=self.params.grid_length,
            episode_length=self.episode_length,
        )
        return result

    def render_frames(self) -> tuple[np.ndarray, ...]:
        from gpu_envs.games.tag.rendering import render_tag_frames

        return render_tag_frames(
            self.state, self.num_taggers, self.params.grid_length, self.episode_length
        )


def _block_threads() -> int:
    """The most threads of a CUDA block of one env (:mod:`gpu_envs.kernels.cuda`)."""
    from gpu_envs.kernels.cuda import MAX_THREADS_PER_AGENT_BLOCK

    return MAX_THREADS_PER_AGENT_BLOCK
