"""rsl_rl's ``VecEnv`` over our batched envs (optional extra ``rsl-rl``).

``RslRlVecEnv(env)`` takes a single-agent vector env built with ``autoreset_mode=SAME_STEP``
(``make_rsl_rl_env`` builds one) and hands rsl_rl what Isaac Lab's wrapper hands it:

- ``get_observations()`` / the step's observations: a ``TensorDict`` ``{"policy": obs}`` of batch
  size [N] on the env's device (rsl_rl's ``obs_groups`` default every set to ``"policy"``);
- ``step(actions)`` returns ``(obs, rewards [N] float32, dones [N] bool, extras)``; a finished env
  is already reset in ``obs``; ``extras["time_outs"]`` [N] bool marks the envs truncated and not
  terminated, on which rsl_rl's PPO bootstraps (it adds ``gamma * V(s_t)``), and
  ``extras["final_observations"]`` holds the last observation of the episodes that ended.

rsl_rl's policies are Gaussian or Beta; for ``Discrete`` actions this module adds
:class:`OneHotCategoricalDistribution` (``distribution_cfg={"class_name":
"gpu_envs.adapters.rsl_rl:OneHotCategoricalDistribution"}``): the policy samples a one-hot vector
of ``num_actions = n`` entries and the env takes its index.

``episode_length_buf`` [N] counts the steps of each env's current episode. Assigning it sets the
engine env's step counters too, so that each env's episode is truncated after
``max_episode_length`` steps counted from the value given: rsl_rl's
``runner.learn(..., init_at_random_ep_len=True)`` (Isaac Lab's default call) spreads the first
time-outs this way. An env without step counters (not one of ours) refuses the assignment.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import VectorEnv
from torch import nn

from gpu_envs.adapters.one_hot import engine_refuses_bad_indices, folded_indices, is_one_hot
from gpu_envs.adapters.same_step import SameStepCore, TorchVecStep, same_step_vec_env
from gpu_envs.engine.kernel_env import KernelEnv

try:
    from rsl_rl.env import VecEnv
    from rsl_rl.modules.distribution import Distribution
    from tensordict import TensorDict
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "gpu_envs.adapters.rsl_rl needs rsl_rl: pip install 'gpu-envs[rsl-rl]'"
    ) from error


class RslRlVecEnv(VecEnv):
    """An rsl_rl ``VecEnv`` view of a single-agent SAME_STEP vector env (see the module docstring).

    Args:
        env: the vector env (see :class:`~gpu_envs.adapters.same_step.SameStepCore`).
        device: the device rsl_rl runs on; must be the env's (default).
        seed: the seed of the first reset (env ``i`` gets ``seed + i``), done here: rsl_rl asks for
            observations before it steps.
    """

    def __init__(
        self, env: VectorEnv, device: str | torch.device | None = None, seed: int | None = None
    ):
        self._core = core = SameStepCore(env, "rsl_rl", device)
        self.num_envs = core.num_envs
        space = core.action_space
        self.num_actions = (
            int(space.n) if isinstance(space, gym.spaces.Discrete) else math.prod(space.shape or ())
        )
        self.max_episode_length = core.max_episode_steps
        self.device = core.device
        self.cfg: dict[str, Any] = {}
        #: Whether the env's own action check refuses an index >= n (folded one-hot check).
        self._engine_refuses_bad_indices = engine_refuses_bad_indices(self.env)
        self._obs = self._pack(core.reset(seed))
        self._episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)

    @property
    def env(self) -> VectorEnv:
        """The vector env underneath."""
        return self._core.env

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """[N] int64: the steps of each env's current episode."""
        return self._episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, steps: torch.Tensor) -> None:
        engine = self.env.unwrapped
        if not isinstance(engine, KernelEnv):
            raise TypeError(
                f"episode_length_buf: {type(engine).__name__} has no step counters to set (rsl_rl "
                "sets them for learn(init_at_random_ep_len=True)); use an engine env, or "
                "init_at_random_ep_len=False"
            )
        engine.set_episode_steps(steps)
        self._episode_length_buf = torch.as_tensor(steps, device=self.device).to(torch.long)

    def _pack(self, obs: torch.Tensor) -> TensorDict:
        return TensorDict({"policy": obs}, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        """The current observations, ``{"policy": [N, *obs_shape]}``."""
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Step with ``actions`` [N, num_actions] (one-hot rows for ``Discrete``)."""
        out = self._step_core(actions)
        dones = out.terminated | out.truncated
        self._episode_length_buf = torch.where(dones, 0, self._episode_length_buf + 1)
        self._obs = self._pack(out.obs)
        extras = {"time_outs": out.time_outs, "final_observations": self._pack(out.final_obs)}
        return self._obs, out.rewards, dones, extras

    def _step_core(self, actions: torch.Tensor) -> TorchVecStep:
        """Step the env with ``actions``: one-hot rows [N, n] (for ``Discrete``) as their indices,
        other actions as given.

        The rows are checked (one 1, the rest 0) when the env validates its actions, without a
        host read of their own: a row that is not one-hot becomes the index n, which the engine's
        action check refuses in the read it makes anyway (before any env moves); the error is then
        reworded to name the row. An env that is not an engine env with the engine's action check
        gets the rows checked here (one read).
        """
        rows = isinstance(actions, torch.Tensor) and actions.dim() == 2
        if not (self._core.discrete and rows and actions.shape[1] == self.num_actions > 1):
            return self._core.step(actions)
        if actions.is_complex():
            raise self._not_one_hot(actions)
        engine = self.env.unwrapped
        if not getattr(engine, "validate_actions", True):
            numbers = actions.to(torch.uint8) if actions.dtype == torch.bool else actions
            return self._core.step(numbers.argmax(dim=1))
        indices = folded_indices(actions, [self.num_actions])[:, 0]  # n where not one-hot
        if not self._engine_refuses_bad_indices:
            if not bool((indices < self.num_actions).all()):
                raise self._not_one_hot(actions)
            return self._core.step(indices)
        try:
            return self._core.step(indices)
        except ValueError as error:
            if bool(is_one_hot(actions).all()):  # another error (a read on the error path only)
                raise
            raise self._not_one_hot(actions) from error

    def _not_one_hot(self, actions: torch.Tensor) -> ValueError:
        """The error for ``actions`` [N, n] that are not one-hot rows, naming the first bad row."""
        rows = actions.detach().cpu()
        bad = (~is_one_hot(rows)).nonzero().flatten()
        where = f"row {int(bad[0])} is {rows[bad[0]].tolist()}; " if len(bad) else ""
        return ValueError(
            f"rsl_rl handed {actions.dtype} actions of shape {tuple(actions.shape)} for a "
            f"Discrete({self.num_actions}) space that are not one-hot rows (one 1, the rest 0): "
            f"{where}sample them with OneHotCategoricalDistribution, or hand indices [N]"
        )

    def close(self) -> None:
        self._core.close()


def make_rsl_rl_env(
    env_id: str = "gpu_envs/CartPole-v1",
    num_envs: int = 64,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    **kwargs: Any,
) -> RslRlVecEnv:
    """``RslRlVecEnv`` of ``gym.make_vec(env_id, num_envs, device=device,
    autoreset_mode=SAME_STEP, **kwargs)``, reset with ``seed``."""
    return RslRlVecEnv(same_step_vec_env(env_id, num_envs, device, **kwargs), seed=seed)


class OneHotCategoricalDistribution(Distribution):
    """A categorical policy head for rsl_rl over ``output_dim`` choices, sampled as one-hot rows.

    The MLP outputs the logits; samples, the deterministic output and the stored actions are
    one-hot float vectors (what rsl_rl's storage of ``num_actions`` floats per env can hold), and
    :class:`RslRlVecEnv` steps the env with their index.
    """

    def __init__(self, output_dim: int) -> None:
        super().__init__(output_dim)
        self._distribution: torch.distributions.OneHotCategorical | None = None

    def _current(self) -> torch.distributions.OneHotCategorical:
        if self._distribution is None:
            raise RuntimeError("call update(mlp_output) first")
        return self._distribution

    def update(self, mlp_output: torch.Tensor) -> None:
        self._distribution = torch.distributions.OneHotCategorical(
            logits=mlp_output, validate_args=False
        )

    def sample(self) -> torch.Tensor:
        return self._current().sample()

    def deterministic_output(self, mlp_output: torch.Tensor) -> torch.Tensor:
        return _ArgmaxOneHot()(mlp_output)

    def as_deterministic_output_module(self) -> nn.Module:
        return _ArgmaxOneHot()

    @property
    def input_dim(self) -> int:
        return self.output_dim

    @property
    def mean(self) -> torch.Tensor:
        """The choice probabilities."""
        return self._current().probs

    @property
    def std(self) -> torch.Tensor:
        """The standard deviation of each one-hot entry, ``sqrt(p (1 - p))``."""
        probs = self._current().probs
        return (probs * (1 - probs)).sqrt()

    @property
    def entropy(self) -> torch.Tensor:
        return self._current().entropy()

    @property
    def params(self) -> tuple[torch.Tensor, ...]:
        return (self._current().logits,)

    def log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        return (self._current().logits * outputs).sum(dim=-1)

    def kl_divergence(
        self, old_params: tuple[torch.Tensor, ...], new_params: tuple[torch.Tensor, ...]
    ) -> torch.Tensor:
        (old,), (new,) = old_params, new_params
        return (old.softmax(-1) * (old.log_softmax(-1) - new.log_softmax(-1))).sum(dim=-1)


class _ArgmaxOneHot(nn.Module):
    """The one-hot row of the largest logit (exportable)."""

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(logits.argmax(dim=-1), logits.shape[-1]).to(logits.dtype)
