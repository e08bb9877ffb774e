"""stable-baselines3 ``VecEnv`` over our batched torch vector envs (optional extra ``sb3``).

SB3 takes only its own ``VecEnv``: NumPy arrays, SAME_STEP autoreset, and per-env info dicts with
``"terminal_observation"`` and ``"TimeLimit.truncated"`` for the envs that finished. ``SB3VecEnv``
gives that view of any single-agent engine env (a :class:`~gpu_envs.engine.kernel_env.KernelEnv`
with the
gymnasium ``VectorEnv`` face: CartPole, Pendulum, an env of your own) with ``Discrete``,
``MultiDiscrete`` or ``Box`` actions, and of Tag's parameter-sharing ``TagGymVectorEnv``; the env is
built with ``autoreset_mode=SAME_STEP``, and the step's outputs are copied from the device to the
host once (rewards as float32, whatever the env's reward dtype)::

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from gpu_envs.adapters.sb3 import make_sb3_vec_env

    venv = VecMonitor(make_sb3_vec_env("gpu_envs/CartPole-v1", num_envs=8, device="cuda"))
    PPO("MlpPolicy", venv).learn(100_000)

A batched env is one object for all its envs, which shapes the attribute and method calls:
``get_attr`` answers the batched env's attribute for every index, ``set_attr`` and ``env_method``
act on the whole batch (a subset of indices is refused), ``env_is_wrapped`` looks through the
gymnasium vector wrappers around the batched env. ``seed(s)`` gives env ``i`` the seed ``s + i``
at the next reset (for Tag: game ``e`` gets ``s + e``); ``s`` must be an int in [0, 2**63 -
num_envs]
(a non-int raises in ``seed``, an int out of range at the reset).

Tag rows: a runner's row is done on the step it is tagged; until its game ends the row is "dead"
(observation of an agent out of the game, reward 0, actions ignored), and SB3, which cannot mask
transitions, sees those steps as ordinary ones of the row's next episode.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_envs.engine.kernel_env import KernelEnv, require_copied_outputs
from gpu_envs.engine.validation import as_action_tensor, as_box_action_tensor, is_int

try:
    from stable_baselines3.common.vec_env.base_vec_env import (
        VecEnv,
        VecEnvIndices,
        VecEnvStepReturn,
    )
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "gpu_envs.adapters.sb3 needs stable-baselines3: pip install 'gpu-envs[sb3]'"
    ) from error

_CPU = torch.device("cpu")


def to_host(*tensors: torch.Tensor) -> list[np.ndarray]:
    """NumPy arrays of floating or bool ``tensors``, floats as float32, made with one device-to-host
    transfer.

    On the CPU float32 and bool arrays are zero-copy views of the tensors (other floats are cast).
    On a GPU the tensors are packed into one float32 buffer on the device, copied once, and unpacked
    on the host.
    """
    for tensor in tensors:
        if not (tensor.is_floating_point() or tensor.dtype == torch.bool):
            raise TypeError(f"to_host takes floating or bool tensors, got {tensor.dtype}")
    if tensors[0].device.type == "cpu":
        return [
            (
                tensor if tensor.dtype in (torch.float32, torch.bool) else tensor.to(torch.float32)
            ).numpy()
            for tensor in tensors
        ]
    return _unpack(_pack(tensors).cpu().numpy(), tensors)


def _pack(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The tensors flattened into one float32 tensor on their device (bool is exact in float32)."""
    return torch.cat([tensor.reshape(-1).to(torch.float32) for tensor in tensors])


def _unpack(packed: np.ndarray, tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """Split a host copy of ``_pack(tensors)`` back into arrays of the tensors' shapes and
    dtypes."""
    arrays, offset = [], 0
    for tensor in tensors:
        part = packed[offset : offset + tensor.numel()].reshape(tensor.shape)
        arrays.append(part.astype(np.bool_) if tensor.dtype == torch.bool else part)
        offset += tensor.numel()
    return arrays


class SB3VecEnv(VecEnv):
    """An SB3 ``VecEnv`` view of a batched gymnasium ``VectorEnv`` of ours (torch tensors,
    SAME_STEP).

    Args:
        env: a single-agent engine env with the ``VectorEnv`` face (``Discrete``, ``MultiDiscrete``
            or ``Box`` actions) or ``TagGymVectorEnv``, possibly inside gymnasium vector wrappers,
            made with ``autoreset_mode=AutoresetMode.SAME_STEP``.

    Actions are checked on the host, where SB3 hands them: integer indices in range, or finite
    floats of the Box's shape within its bounds (sent to the env as float32); the error names the
    first bad entry. ``step`` returns ``(obs, rewards, dones, infos)`` as NumPy arrays (rewards
    float32) and a list of dicts. Only the envs that finished get a dict of their own, with
    ``"terminal_observation"`` (the last observation of the episode) and ``"TimeLimit.truncated"``
    (truncated and not terminated); the others share one empty dict per env, allocated once.
    """

    def __init__(self, env: VectorEnv):
        mode = env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                "SB3 needs SAME_STEP autoreset: build the env with "
                "autoreset_mode=AutoresetMode.SAME_STEP (e.g. make_sb3_vec_env(...)); got "
                f"autoreset_mode={mode!r}"
            )
        space = env.single_action_space
        if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            if np.any(space.start != 0):
                raise ValueError(
                    "SB3VecEnv takes discrete action spaces that start at 0 (as the engine's "
                    f"kernels read them), got {space}"
                )
            self._action_upper = (
                int(space.n) - 1
                if isinstance(space, gym.spaces.Discrete)
                else [int(v) - 1 for v in space.nvec]
            )
        elif not isinstance(space, gym.spaces.Box):
            raise TypeError(
                f"SB3VecEnv takes Discrete, MultiDiscrete or Box action spaces, got {space}"
            )
        self._action_shape = (env.num_envs, *(space.shape or ()))
        self.env = env
        require_copied_outputs(env, "SB3VecEnv", self)
        self.device: torch.device = cast(KernelEnv, env.unwrapped).device
        self._actions: torch.Tensor | None = None
        self._empty_infos: list[dict[str, Any]] = [{} for _ in range(env.num_envs)]
        # VecEnv.__init__ calls get_attr("render_mode"), which needs self.env (set above).
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    # ----------------------------------------------------------------------------- stepping
    def reset(self) -> np.ndarray:
        """Reset every env; seeds from ``seed()`` and options from ``set_options()`` apply once."""
        seed = self._seeds[0]
        options = self._options[0]
        if any(other != options for other in self._options):
            raise ValueError(
                "per-env reset options differ: a batched env takes one options dict for all envs"
            )
        obs, _ = self.env.reset(seed=seed, options=options or None)
        self._reset_seeds()
        self._reset_options()
        return to_host(obs)[0]

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed env ``i`` with ``seed + i`` at the next reset (None: a fresh random seed).

        A seed that is not an int raises here; the env checks an int's range at that reset.
        """
        if seed is not None and not is_int(seed):
            raise ValueError(
                "seed must be an int in [0, 2**63 - num_envs] (env i gets seed + i) or None, got "
                f"{seed!r}"
            )
        return super().seed(None if seed is None else int(seed))

    def step_async(self, actions: np.ndarray) -> None:
        """Check ``actions`` on the host (no device synchronisation) and keep them for
        ``step_wait``."""
        space = self.action_space
        if isinstance(space, gym.spaces.Box):
            self._actions = as_box_action_tensor(actions, self._action_shape, _CPU)
        else:
            self._actions = as_action_tensor(actions, self._action_shape, _CPU, self._action_upper)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async(actions)")
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        obs, final_obs, has_final, rewards, terminated, truncated = to_host(
            obs, info["final_obs"], info["_final_obs"], rewards, terminated, truncated
        )
        dones = terminated | truncated
        if any(self._empty_infos):  # a consumer wrote into a shared empty dict: replace them all
            self._empty_infos = [{} for _ in range(self.num_envs)]
        infos = self._empty_infos.copy()
        for i in dones.nonzero()[0].tolist():
            # Tag: a runner's row that ends before its game (tagged) has no final_obs: its obs is
            # final.
            infos[i] = {
                "terminal_observation": final_obs[i] if has_final[i] else obs[i],
                "TimeLimit.truncated": bool(truncated[i] and not terminated[i]),
            }
        return obs, rewards, dones, infos

    def close(self) -> None:
        self.env.close()

    # ----------------------------------------------------------------------------- attributes
    def _chain(self) -> list[Any]:
        """The env and the envs it wraps, outermost first."""
        chain = [self.env]
        while hasattr(chain[-1], "env") and chain[-1].env is not chain[-1]:
            chain.append(chain[-1].env)
        return chain

    def _owner(self, name: str) -> Any:
        """The outermost env of the chain that has attribute ``name``."""
        for env in self._chain():
            if hasattr(env, name):
                return env
        raise AttributeError(f"{type(self.env.unwrapped).__name__} has no attribute {name!r}")

    def _check_whole_batch(self, indices: VecEnvIndices, what: str) -> None:
        if sorted(self._get_indices(indices)) != list(range(self.num_envs)):
            raise ValueError(
                f"{what} acts on the whole batched env; got indices={indices!r} (use None for all "
                f"{self.num_envs} envs)"
            )

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The batched env's attribute ``attr_name``, once per index."""
        value = getattr(self._owner(attr_name), attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` on the batched env (all envs at once; a subset of indices raises)."""
        self._check_whole_batch(indices, "set_attr")
        try:
            owner = self._owner(attr_name)
        except AttributeError:
            owner = self.env
        setattr(owner, attr_name, value)

    def env_method(
        self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs
    ) -> list[Any]:
        """Call the batched env's method once (a subset of indices raises); its result per index."""
        self._check_whole_batch(indices, "env_method")
        result = getattr(self._owner(method_name), method_name)(*method_args, **method_kwargs)
        return [result for _ in range(self.num_envs)]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Whether a wrapper of ``wrapper_class`` is in the chain around the batched env."""
        wrapped = any(isinstance(env, wrapper_class) for env in self._chain())
        return [wrapped for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """One RGB frame per env (per game for Tag) when ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"get_images() needs render_mode='rgb_array', the env has {self.render_mode!r}",
                stacklevel=2,
            )
            return [None for _ in range(self.num_envs)]
        return list(cast(Sequence[np.ndarray], self.env.render()))


def make_sb3_vec_env(
    env_id: str = "gpu_envs/CartPole-v1",
    num_envs: int = 8,
    device: str | torch.device = "cpu",
    **kwargs: Any,
) -> SB3VecEnv:
    """``SB3VecEnv(gym.make_vec(env_id, num_envs, device=device, autoreset_mode=SAME_STEP,
    **kwargs))``.

    The env is built with ``validate_actions=False`` unless given: ``SB3VecEnv`` checks the
    actions on the host, where SB3 hands them, which costs no device synchronisation.
    For ``"gpu_envs/Tag-v0"`` ``num_envs`` counts games; the VecEnv has one env per (game, agent).
    """
    import gpu_envs  # noqa: F401 - registers the env ids

    kwargs.setdefault("validate_actions", False)  # SB3VecEnv checks the actions on the host
    env = gym.make_vec(
        env_id, num_envs=num_envs, device=device, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs
    )
    return SB3VecEnv(env)
