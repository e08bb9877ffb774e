"""What the adapters for torch-batched trainers (rsl_rl, skrl, rl_games) share.

These libraries step a batch of envs whose tensors stay on one device, reset finished envs in the
step that ends them, and bootstrap a time-out from a value estimate. :class:`SameStepCore` gives
them one view of a single-agent vector env of ours (or any gymnasium ``VectorEnv`` that returns
torch tensors): the env must be built with ``autoreset_mode=SAME_STEP``, and every step returns a
:class:`TorchVecStep` whose tensors are on the env's device (no host copy, no synchronisation).
Each adapter module then packs it the way its library reads it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_envs.engine.kernel_env import KernelEnv, require_copied_outputs


class TorchVecStep(NamedTuple):
    """One step of the batch, every tensor on the env's device."""

    #: ``[N, *obs_shape]`` float32, after the same-step reset of the envs that ended.
    obs: torch.Tensor
    #: [N] float32 (whatever the env's reward dtype).
    rewards: torch.Tensor
    #: [N] bool flags.
    terminated: torch.Tensor
    truncated: torch.Tensor
    #: [N] bool: truncated and not terminated (the steps to bootstrap from a value estimate).
    time_outs: torch.Tensor
    #: ``[N, *obs_shape]``: the last observation of the episodes that ended, ``obs`` elsewhere.
    final_obs: torch.Tensor
    #: the env's own ``info`` dict.
    info: dict[str, Any]


def same_step_vec_env(
    env_id: str, num_envs: int, device: str | torch.device, **kwargs
) -> VectorEnv:
    """``gym.make_vec(env_id, num_envs, device=device, autoreset_mode=SAME_STEP, **kwargs)``."""
    import gpu_envs  # noqa: F401 - registers the env ids

    return gym.make_vec(
        env_id, num_envs=num_envs, device=device, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs
    )


class SameStepCore:
    """A single-agent, SAME_STEP, torch-tensor view of ``env`` for the adapter of ``library``.

    Args:
        env: a single-agent engine env with the gymnasium ``VectorEnv`` face (CartPole, Pendulum,
            an env of your own), possibly inside vector wrappers, or any other ``VectorEnv`` that
            returns torch tensors; built with ``autoreset_mode=SAME_STEP``. Its observation space
            is a ``Box``; its action space ``Discrete`` (starting at 0) or ``Box``.
        library: the library's name, for the error messages.
        device: where the library keeps its tensors. Defaults to the engine env's device (required
            for other envs); a different device than the engine env's raises.

    Raises a ``TypeError`` for an env or spaces it cannot serve and a ``ValueError`` for a
    multi-agent env, a wrong autoreset mode or a device mismatch, each naming the fix.
    """

    def __init__(self, env: VectorEnv, library: str, device: str | torch.device | None = None):
        if not isinstance(env, VectorEnv):
            raise TypeError(
                f"the {library} adapter takes a gymnasium VectorEnv (e.g. gym.make_vec("
                f"'gpu_envs/CartPole-v1', ...)), got {type(env).__name__}"
            )
        unwrapped = env.unwrapped
        agents = getattr(unwrapped, "num_agents", 1)
        if agents != 1:
            raise ValueError(
                f"the {library} adapter takes single-agent envs; {type(unwrapped).__name__} has "
                f"{agents} agents per game (Tag: see docs/using-with.md for the multi-agent forms)"
            )
        mode = env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"{library} expects the env to reset finished envs in the step that ends them: "
                "build it with autoreset_mode=AutoresetMode.SAME_STEP (e.g. "
                f"same_step_vec_env(...)); got autoreset_mode={mode!r}"
            )
        obs_space, action_space = env.single_observation_space, env.single_action_space
        if not isinstance(obs_space, gym.spaces.Box):
            raise TypeError(f"the {library} adapter takes Box observations, got {obs_space}")
        if isinstance(action_space, gym.spaces.Discrete):
            if int(action_space.start) != 0:
                raise TypeError(
                    f"the {library} adapter takes Discrete actions that start at 0, got "
                    f"{action_space}"
                )
        elif not isinstance(action_space, gym.spaces.Box):
            raise TypeError(
                f"the {library} adapter takes Discrete or Box action spaces, got {action_space}"
            )
        require_copied_outputs(env, f"the {library} adapter", self)
        self.device = _resolve_device(unwrapped, device, library)
        self.env = env
        self.library = library
        self.num_envs: int = env.num_envs
        self.observation_space: gym.spaces.Box = obs_space
        self.action_space: gym.Space = action_space
        self._action_shape = (self.num_envs, *(action_space.shape or ()))
        if isinstance(action_space, gym.spaces.Box):
            self._low, self._high = (
                torch.as_tensor(bound, dtype=torch.float32, device=self.device)
                for bound in (action_space.low, action_space.high)
            )

    @property
    def discrete(self) -> bool:
        """Whether the actions are ``Discrete`` indices."""
        return isinstance(self.action_space, gym.spaces.Discrete)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Reset every env (env ``i`` gets ``seed + i``); the ``[N, *obs_shape]`` observations."""
        obs, _ = self.env.reset(seed=seed)
        return obs

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """``actions`` as the env takes them: Discrete indices from [N] or [N, 1] (any integer
        dtype; floats are refused) as int64 [N]; Box values (floating point or integer; bool and
        complex are refused) reshaped to ``[N, *shape]`` as float32 and clipped to the space's
        bounds (Gaussian policies sample outside them). They must be a
        tensor on the env's device (a library whose models sit elsewhere gets a clear error, not a
        copy).
        """
        if not isinstance(actions, torch.Tensor):
            raise TypeError(
                f"{self.library} handed the env {type(actions).__name__} actions; expected a torch "
                f"tensor on {self.device}"
            )
        if actions.device != self.device:
            raise ValueError(
                f"{self.library} handed actions on {actions.device}, but the env lives on "
                f"{self.device}: put the models on the env's device (or build the env with "
                f"device={str(actions.device)!r})"
            )
        expected = self._action_shape
        if actions.numel() != int(torch.Size(expected).numel()):
            raise ValueError(
                f"{self.library} handed actions of shape {tuple(actions.shape)}; the env takes "
                f"{expected}" + (" (or a trailing 1)" if self.discrete else "")
            )
        if self.discrete:
            if actions.is_floating_point() or actions.is_complex() or actions.dtype == torch.bool:
                raise TypeError(
                    f"{self.library} handed {actions.dtype} actions for a Discrete space; the env "
                    "takes integer indices (a float is not rounded or floored into one)"
                )
            return actions.reshape(expected).to(torch.int64)
        if actions.is_complex() or actions.dtype == torch.bool:
            raise TypeError(
                f"{self.library} handed {actions.dtype} actions for a Box space; the env takes "
                "real numbers (floating point or integer)"
            )
        return torch.clamp(actions.reshape(expected).to(torch.float32), self._low, self._high)

    def step(self, actions: torch.Tensor) -> TorchVecStep:
        """Step the batch with ``actions`` (see :meth:`env_actions`)."""
        obs, rewards, terminated, truncated, info = self.env.step(self.env_actions(actions))
        ended = info["_final_obs"].reshape(-1, *([1] * (obs.dim() - 1)))
        return TorchVecStep(
            obs=obs,
            rewards=rewards.to(torch.float32),
            terminated=terminated,
            truncated=truncated,
            time_outs=truncated & ~terminated,
            final_obs=torch.where(ended, info["final_obs"], obs),
            info=info,
        )

    @property
    def max_episode_steps(self) -> int:
        """The env's truncation horizon (0: none known)."""
        return int(getattr(self.env.unwrapped, "max_episode_steps", None) or 0)

    def close(self) -> None:
        self.env.close()


def _resolve_device(
    unwrapped: Any, device: str | torch.device | None, library: str
) -> torch.device:
    """The env's device, checked against the one the library asked for."""
    if not isinstance(unwrapped, KernelEnv):
        if device is None:
            raise ValueError(
                f"the {library} adapter cannot tell where {type(unwrapped).__name__}'s tensors "
                "live: pass device=..."
            )
        return torch.device(device)
    if device is not None:
        wanted = torch.device(device)
        same = wanted.type == unwrapped.device.type and wanted.index in (
            None,
            unwrapped.device.index,
        )
        if not same:
            raise ValueError(
                f"{library} was asked for device {str(wanted)!r}, but the env lives on "
                f"{unwrapped.device}: build the env with device={str(wanted)!r} (its kernels "
                "cannot move)"
            )
    return unwrapped.device
