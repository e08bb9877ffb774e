"""TorchRL ``EnvBase`` classes for the engine's envs (optional extra ``torchrl``).

``KernelTorchRLEnv(batched_env)`` takes any single-agent engine env (a
:class:`~gpu_envs.engine.kernel_env.KernelEnv`: CartPole, Pendulum, an env of your own) and derives
its specs
from the env's spaces; ``CartPoleTorchRLEnv`` builds CartPole's, and ``TagTorchRLEnv`` is Tag as a
multi-agent env. All are native TorchRL envs with ``batch_size=[num_envs]`` on the env's device: the
tensors our batched envs return go into the TensorDicts as they are (team views for Tag), with no
host copy.

TorchRL resets finished envs itself (``rollout``, collectors): the underlying env runs with
``autoreset_mode=DISABLED`` and ``reset`` honours the ``"_reset"`` mask ([num_envs, 1] bool) as a
partial reset of the masked envs only.

Discrete actions are encoded as TorchRL's ``GymEnv`` encodes them, chosen by the same option
``categorical_action_encoding`` (default False, as ``GymEnv``): one-hot (``OneHot`` /
``MultiOneHot`` specs, int64), or indices with ``categorical_action_encoding=True``
(``Categorical`` / ``MultiCategorical``). ``Box`` actions are ``Bounded`` float32 specs with the
space's bounds.

- ``KernelTorchRLEnv``: ``"observation"`` ``[E, *obs_shape]`` float32 (``Bounded`` when the
  observation
  space's bounds are all finite, else ``Unbounded``), ``"action"`` as above, ``"reward"`` [E, 1]
  float32 (whatever the env's reward dtype), ``"done"``/``"terminated"``/``"truncated"`` [E, 1]
  bool.
  ``CartPoleTorchRLEnv``: ``"observation"`` [E, 4], ``"action"`` [E, 2] one-hot or [E] index in {0,
  1}.
- ``TagTorchRLEnv``: the agents in groups (``group_map``, as TorchRL's VMAS and PettingZoo envs
  take it): by default by team, ``"tagger"`` and ``"runner"`` (the agent names' prefixes, TorchRL's
  own default); ``MarlGroupMapType.ALL_IN_ONE_GROUP`` puts every agent in ``"agents"`` (one
  ``reward_key`` and ``action_key``, as TorchRL's multi-agent PPO tutorial reads them),
  ``ONE_GROUP_PER_AGENT`` each agent in its own. The agent dimension follows the batch
  dimension: ``(group, "observation")`` [E, n_group, obs_dim], ``(group, "active")`` [E, n_group]
  bool (the agent is in the game), ``(group, "action")`` [E, n_group, A+1 + R+1] (two one-hot
  blocks) or [E, n_group, 2] (acceleration index, turn index), ``(group, "reward")``
  [E, n_group, 1]; the done flags are shared by the game at the root, [E, 1].

``set_seed(s)`` applies at the next reset: env ``i`` gets the seed ``s + i``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

try:
    from tensordict import TensorDict, TensorDictBase
    from torchrl.data import (
        Bounded,
        Categorical,
        Composite,
        MultiCategorical,
        MultiOneHot,
        OneHot,
        TensorSpec,
        Unbounded,
    )
    from torchrl.envs import EnvBase
    from torchrl.envs.utils import MarlGroupMapType, check_marl_grouping
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "gpu_envs.adapters.torchrl needs torchrl: pip install 'gpu-envs[torchrl]'"
    ) from error

from gpu_envs.adapters.one_hot import engine_refuses_bad_indices, folded_indices
from gpu_envs.engine.kernel_env import KernelEnv, require_copied_outputs
from gpu_envs.engine.validation import per_env_seeds
from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.tag.env import TEAMS, TagEnv


class _BatchedTorchRLEnv(EnvBase):
    """What the envs share: the batched env underneath, seeding, the reset mask, done specs."""

    def __init__(self, batched_env: KernelEnv, categorical_action_encoding: bool):
        require_copied_outputs(batched_env, type(self).__name__, self)
        self.batched_env = batched_env
        self.categorical_action_encoding = categorical_action_encoding
        #: whether the env's own action check refuses an index out of range
        self._folds_one_hot_check = engine_refuses_bad_indices(batched_env)
        super().__init__(device=batched_env.device, batch_size=torch.Size([batched_env.num_envs]))
        self.is_closed = False  # (EnvBase starts closed: its close() would not reach batched_env)
        self._next_seed: int | None = None
        done = Categorical(2, shape=(*self.batch_size, 1), dtype=torch.bool, device=self.device)
        self.full_done_spec = Composite(
            done=done,
            terminated=done.clone(),
            truncated=done.clone(),
            shape=self.batch_size,
            device=self.device,
        )

    def _action_leaf(self, nvec: list[int], shape: tuple[int, ...]) -> TensorSpec:
        """The spec of one action entry of ``shape`` (batch and agent dims) with ``nvec`` choices
        per head."""
        dev = self.device
        if self.categorical_action_encoding:
            if len(nvec) == 1:
                return Categorical(nvec[0], shape=shape, dtype=torch.int64, device=dev)
            return MultiCategorical(
                nvec=nvec, shape=(*shape, len(nvec)), dtype=torch.int64, device=dev
            )
        if len(nvec) == 1:
            return OneHot(nvec[0], shape=(*shape, nvec[0]), dtype=torch.int64, device=dev)
        return MultiOneHot(nvec=nvec, shape=(*shape, sum(nvec)), dtype=torch.int64, device=dev)

    def _action_indices(self, spec: TensorSpec, action: torch.Tensor) -> torch.Tensor:
        """The action indices the batched env takes, from an action of ``spec``.

        When the batched env validates actions, a one-hot action is checked too: a block that is
        not one-hot becomes an index out of range, which the env's own check refuses in the read
        it makes anyway (``one_hot.folded_indices``; :meth:`_step_checked` rewords the error), so
        the check adds no host read (a GPU synchronisation) of its own. An env without the engine's
        index check has the action checked here (one read). Indices are checked by the env."""
        if self.categorical_action_encoding:
            return action
        if not self.batched_env.validate_actions:
            return spec.to_categorical(action)
        if action.dtype != spec.dtype or action.shape != spec.shape:
            raise _not_one_hot(spec, action)  # (the metadata needs no read)
        if not self._folds_one_hot_check:
            if not bool(spec.is_in(action)):
                raise _not_one_hot(spec, action)
            return spec.to_categorical(action)
        nvec = spec.nvec if isinstance(spec, MultiOneHot) else [spec.space.n]
        indices = folded_indices(action, nvec)
        return indices if isinstance(spec, MultiOneHot) else indices[..., 0]

    def _step_checked(self, indices: torch.Tensor, given: list[tuple[TensorSpec, torch.Tensor]]):
        """``batched_env.step(indices)``; an error of its action check that an action of ``given``
        (spec, action) that is not one-hot caused is reworded to say so (the actions are read on
        this error path only)."""
        try:
            return self.batched_env.step(indices)
        except ValueError as error:
            if self.categorical_action_encoding or not self.batched_env.validate_actions:
                raise
            for spec, action in given:
                if not bool(spec.is_in(action)):
                    raise _not_one_hot(spec, action) from error
            raise

    def _set_seed(self, seed: int | None) -> None:
        if (
            seed is not None
        ):  # a ValueError naming the seed and its rule, before TorchRL's own use of it
            per_env_seeds(
                seed, self.batched_env.num_envs, torch.device("cpu"), self.batched_env.env_noun
            )
        self._next_seed = seed

    def _reset_batched_env(self, tensordict: TensorDictBase | None):
        """Reset the batched env (only the envs of ``tensordict["_reset"]`` when it is given)."""
        reset = None if tensordict is None else tensordict.get("_reset", None)
        options = None if reset is None else {"reset_mask": reset.reshape(self.batch_size)}
        seed, self._next_seed = self._next_seed, None
        return self.batched_env.reset(seed=seed, options=options)

    def _done_entries(
        self, terminated: torch.Tensor, truncated: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        return {
            "done": (terminated | truncated).unsqueeze(-1),
            "terminated": terminated.unsqueeze(-1),
            "truncated": truncated.unsqueeze(-1),
        }

    def to(self, device) -> EnvBase:
        """The env itself when ``device`` is its own; the kernels cannot move, so others raise."""
        target = torch.device(device)
        if target.type != self.device.type or target.index not in (None, self.device.index):
            raise ValueError(
                f"this env lives on {self.device}; build a new one with device={str(device)!r}"
            )
        return self

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Release the batched env's device buffers."""
        if not self.is_closed:
            self.batched_env.close()
        super().close(raise_if_closed=raise_if_closed)


class KernelTorchRLEnv(_BatchedTorchRLEnv):
    """Any single-agent engine env as a TorchRL env, its specs derived from the env's spaces
    (see the module docstring).

    Args:
        batched_env: a :class:`~gpu_envs.engine.kernel_env.KernelEnv` with one agent per env, a
        ``Box``
            observation space and a ``Discrete``, ``MultiDiscrete`` (one axis) or ``Box`` action
            space, built with ``autoreset_mode="disabled"`` (TorchRL resets finished envs itself).
        categorical_action_encoding: discrete actions as indices (True) or one-hot (False,
            ``GymEnv``'s default).
    """

    def __init__(self, batched_env: KernelEnv, *, categorical_action_encoding: bool = False):
        _check_single_agent_disabled(batched_env)
        super().__init__(batched_env, categorical_action_encoding)
        shape, dev = tuple(self.batch_size), self.device
        self.observation_spec = Composite(
            observation=_box_spec(batched_env.single_observation_space, shape, dev, "observation"),
            shape=shape,
            device=dev,
        )
        space = batched_env.single_action_space
        if isinstance(space, gym.spaces.Box):
            self.action_spec = _box_spec(space, shape, dev, "action")
        elif isinstance(space, gym.spaces.Discrete):
            self.action_spec = self._action_leaf([int(space.n)], shape)
        elif isinstance(space, gym.spaces.MultiDiscrete) and len(space.shape) == 1:
            self.action_spec = self._action_leaf(space.nvec.tolist(), shape)
        else:
            raise TypeError(
                "KernelTorchRLEnv takes Discrete, one-axis MultiDiscrete or Box action spaces, "
                f"got {space}"
            )
        self.reward_spec = Unbounded(shape=(*shape, 1), dtype=torch.float32, device=dev)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        obs, _ = self._reset_batched_env(tensordict)
        return TensorDict(
            {"observation": obs, **self.full_done_spec.zero()},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = _required(tensordict, "action")
        if isinstance(self.batched_env.single_action_space, gym.spaces.Box):
            step = self.batched_env.step(action)
        else:
            indices = self._action_indices(self.action_spec, action)
            step = self._step_checked(indices, [(self.action_spec, action)])
        obs, rewards, terminated, truncated, _ = step
        return TensorDict(
            {
                "observation": obs,
                "reward": rewards.to(torch.float32).unsqueeze(-1),
                **self._done_entries(terminated, truncated),
            },
            batch_size=self.batch_size,
            device=self.device,
        )


def _not_one_hot(spec: TensorSpec, action: torch.Tensor) -> ValueError:
    return ValueError(
        f"action must be one-hot: {spec.dtype} of shape {tuple(spec.shape)} with exactly one 1 per "
        f"choice block, got {action.dtype} of shape {tuple(action.shape)} that is not"
    )


def _required(tensordict: TensorDictBase, key):
    """``tensordict[key]``, or a KeyError that names the missing entry and what ``step`` expects."""
    value = tensordict.get(key, None)
    if value is None:
        raise KeyError(
            f"the tensordict given to step() has no {key!r} entry: put the actions there (see the "
            "env's action_spec)"
        )
    return value


def _check_single_agent_disabled(batched_env) -> None:
    """A TypeError/ValueError unless ``batched_env`` is a single-agent engine env without
    autoreset."""
    if not isinstance(batched_env, KernelEnv):
        raise TypeError(
            "KernelTorchRLEnv takes an engine env (a gpu_envs.engine.kernel_env.KernelEnv), got "
            f"{type(batched_env).__name__}"
        )
    if batched_env.num_agents != 1:
        raise ValueError(
            f"KernelTorchRLEnv takes single-agent envs; {type(batched_env).__name__} has "
            f"{batched_env.num_agents} agents per env (for Tag use TagTorchRLEnv)"
        )
    if batched_env.autoreset_mode != AutoresetMode.DISABLED:
        raise ValueError(
            "KernelTorchRLEnv needs an env built with autoreset_mode='disabled' (TorchRL resets "
            f"finished envs itself), got {batched_env.autoreset_mode}"
        )


def _box_spec(
    space: gym.Space, batch: tuple[int, ...], device: torch.device, what: str
) -> TensorSpec:
    """The float32 spec of a batch of ``Box`` values: ``Bounded`` by the space's bounds when they
    are
    all finite, else ``Unbounded``."""
    if not isinstance(space, gym.spaces.Box):
        raise TypeError(f"KernelTorchRLEnv takes a Box {what} space, got {space}")
    shape = (*batch, *space.shape)
    if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
        return Unbounded(shape=shape, dtype=torch.float32, device=device)
    low, high = (
        torch.as_tensor(bound, dtype=torch.float32).expand(shape)
        for bound in (space.low, space.high)
    )
    return Bounded(low=low, high=high, shape=shape, dtype=torch.float32, device=device)


class CartPoleTorchRLEnv(KernelTorchRLEnv):
    """``num_envs`` CartPole-v1 games as a TorchRL env (see the module docstring).

    Args:
        num_envs: number of games.
        device: "cpu", "cuda", "cuda:N" or "auto".
        categorical_action_encoding: actions as indices (True) or one-hot (False, ``GymEnv``'s
        default).
        **kwargs: ``CartPoleVectorEnv`` options (dtype, max_episode_steps, sutton_barto_reward,
            validate_actions); the autoreset mode is DISABLED (TorchRL resets).
    """

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        *,
        categorical_action_encoding: bool = False,
        **kwargs: Any,
    ):
        super().__init__(
            CartPoleVectorEnv(num_envs, device, autoreset_mode=AutoresetMode.DISABLED, **kwargs),
            categorical_action_encoding=categorical_action_encoding,
        )


class TagTorchRLEnv(_BatchedTorchRLEnv):
    """``num_envs`` games of Tag as a multi-agent TorchRL env, its agents in groups (see the module
    docstring).

    Args:
        num_envs: number of games E.
        device: "cpu", "cuda", "cuda:N" or "auto".
        validate_actions: check actions before each step (on CUDA one host synchronisation).
        categorical_action_encoding: actions as index pairs (True) or two one-hot blocks (False,
            ``GymEnv``'s default).
        group_map: None (the teams, "tagger" and "runner"), a ``MarlGroupMapType``, or a dict of
            group name -> agent names (``agent_names``: "tagger_0", ..., "runner_0", ...), each
            agent in exactly one group. ``group_map`` then holds the groups and ``n_agents`` the
            agents per game (as on TorchRL's VMAS env).
        **params: the Tag parameters (docs/spec-tag.md, Parameters; see
          ``gpu_envs.games.tag.env.TagParams``).
    """

    batched_env: TagEnv

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        *,
        validate_actions: bool = True,
        categorical_action_encoding: bool = False,
        group_map: MarlGroupMapType | dict[str, list[str]] | None = None,
        **params: Any,
    ):
        tag = TagEnv(
            num_envs,
            device,
            autoreset_mode=AutoresetMode.DISABLED,
            validate_actions=validate_actions,
            **params,
        )
        try:
            groups = _group_map(group_map, tag)
            super().__init__(tag, categorical_action_encoding)
        except BaseException:
            tag.close()  # a refused group_map leaves no env holding its buffers
            raise
        self.group_map, dev = groups, self.device
        self.n_agents = tag.num_agents
        #: each group's agents: a slice of the agent axis when they are consecutive, else indices
        self._agents = {
            group: _agent_selection([tag.agent_names.index(a) for a in agents], dev)
            for group, agents in self.group_map.items()
        }
        observation, action, reward = {}, {}, {}
        for group in self.group_map:
            shape = (*self.batch_size, len(self.group_map[group]))
            observation[group] = Composite(
                observation=Unbounded(shape=(*shape, tag.obs_dim), dtype=torch.float32, device=dev),
                active=Categorical(2, shape=shape, dtype=torch.bool, device=dev),
                shape=shape,
                device=dev,
            )
            action[group] = Composite(
                action=self._action_leaf(list(tag.action_nvec), shape), shape=shape, device=dev
            )
            reward[group] = Composite(
                reward=Unbounded(shape=(*shape, 1), dtype=torch.float32, device=dev),
                shape=shape,
                device=dev,
            )
        self.observation_spec = Composite(observation, shape=self.batch_size, device=dev)
        self.action_spec = Composite(action, shape=self.batch_size, device=dev)
        self.reward_spec = Composite(reward, shape=self.batch_size, device=dev)

    def _groups(self, entries: dict[str, torch.Tensor]) -> dict[str, TensorDict]:
        """Per-group TensorDicts of the groups' agents of the [E, N, ...] ``entries`` (views
        where a group's agents are consecutive)."""
        return {
            group: TensorDict(
                {key: value[:, agents] for key, value in entries.items()},
                batch_size=(*self.batch_size, len(self.group_map[group])),
                device=self.device,
            )
            for group, agents in self._agents.items()
        }

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        obs, info = self._reset_batched_env(tensordict)
        return TensorDict(
            {
                **self._groups({"observation": obs, "active": info["active"]}),
                **self.full_done_spec.zero(),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        tag = self.batched_env
        actions = torch.empty(
            (tag.num_envs, tag.num_agents, len(tag.action_nvec)),
            dtype=torch.int64,
            device=self.device,
        )
        given = [
            (self.action_spec[group, "action"], _required(tensordict, (group, "action")))
            for group in self._agents
        ]
        for agents, (spec, action) in zip(self._agents.values(), given):
            actions[:, agents] = self._action_indices(spec, action)
        obs, rewards, terminated, truncated, info = self._step_checked(actions, given)
        groups = self._groups(
            {"observation": obs, "active": info["active"], "reward": rewards.unsqueeze(-1)}
        )
        return TensorDict(
            {**groups, **self._done_entries(terminated, truncated)},
            batch_size=self.batch_size,
            device=self.device,
        )


#: Keys at the root of Tag's TensorDicts, which no group may be named.
_ROOT_KEYS = ("done", "terminated", "truncated", "_reset", "next")


def _group_map(
    group_map: MarlGroupMapType | dict[str, list[str]] | None, tag: TagEnv
) -> dict[str, list[str]]:
    """The group map of ``TagTorchRLEnv`` (None: by team), checked by TorchRL's own rules."""
    names = list(tag.agent_names)
    if group_map is None:
        resolved = {team: names[tag.team_slices[team]] for team in TEAMS}
    elif isinstance(group_map, MarlGroupMapType):
        resolved = group_map.get_group_map(names)
    elif isinstance(group_map, dict) and all(isinstance(group, str) for group in group_map):
        resolved = {group: list(agents) for group, agents in group_map.items()}
    else:
        raise TypeError(
            "group_map must be None, a torchrl.envs.utils.MarlGroupMapType or a dict of group "
            f"name (str) -> agent names, got {group_map!r}"
        )
    try:
        check_marl_grouping(resolved, names)
    except ValueError as error:
        raise ValueError(f"group_map: {error} (the agents are {names})") from None
    taken = sorted(set(resolved) & set(_ROOT_KEYS))
    if taken:
        raise ValueError(f"group_map: the group names {taken} are root keys of the env's data")
    return resolved


def _agent_selection(indices: list[int], device: torch.device) -> slice | torch.Tensor:
    """The agent-axis index of a group: a slice (a view) when ``indices`` are consecutive."""
    if indices == list(range(indices[0], indices[0] + len(indices))):
        return slice(indices[0], indices[0] + len(indices))
    return torch.tensor(indices, dtype=torch.int64, device=device)
