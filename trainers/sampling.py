"""Action sampling from the policy's logits on the device: torch's generator or a Numba kernel.

Both samplers map logits [B, sum(nvec)] to actions [B, H] without a host synchronisation: int64
category indices for MultiDiscrete heads, float32 Gaussian draws ``mean + std * N(0, 1)`` for
``ContinuousActions`` (unclipped: the game clips them to its bounds, the log-probability is the
draw's). The Numba sampler (CPU only) draws with the counter-based RNG of ``gpu_envs.kernels.rng``:
draw ``b * H + h`` (two draws ``2 * (b * H + h)`` and the next for a Gaussian) of call ``counter``
of stream ``seed``, so its results depend on nothing else.
The trainer uses the one named in ``trainer.action_sampler`` (:func:`make_sampler`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.distributions import Categorical

from gpu_envs.kernels.samplers import sample_categorical, sample_normal
from gpu_envs.trainers.policy import action_dtype, gaussian_parameters, is_continuous


class TorchSampler:
    """``torch.distributions.Categorical(logits=...).sample()`` per head, or ``torch.randn`` for a
    Gaussian, on the logits' device."""

    name = "torch"

    def __init__(self, seed: int = 0):
        del seed  # draws come from torch's generator, seeded by fabric.seed_everything

    def __call__(self, logits: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
        if is_continuous(nvec):
            mean, log_std = gaussian_parameters(logits)
            return torch.addcmul(mean, log_std.exp(), torch.randn_like(mean))
        parts = logits.split(tuple(nvec), dim=-1)
        return torch.stack(
            [Categorical(logits=p, validate_args=False).sample() for p in parts], dim=-1
        )

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        del state


class NumbaSampler:
    """The njit inverse-CDF kernel over the logits (softmax inside the kernel), or the Box-Muller
    kernel for a Gaussian head; CPU tensors only."""

    name = "numba"

    def __init__(self, seed: int = 0):
        self.seed = np.uint64(seed)
        self.counter = 0
        self._offsets: dict[tuple, np.ndarray] = {}

    def __call__(self, logits: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
        if logits.device.type != "cpu":
            raise ValueError(
                "the numba action sampler runs on the CPU only; use action_sampler='torch'"
            )
        params = logits.detach().contiguous().numpy()
        out = torch.empty((logits.shape[0], len(nvec)), dtype=action_dtype(nvec))
        if is_continuous(nvec):
            sample_normal(params, self.seed, np.uint64(self.counter), out.numpy())
        else:
            sample_categorical(
                params, self._offsets_of(nvec), self.seed, np.uint64(self.counter), out.numpy()
            )
        self.counter += 1
        return out

    def _offsets_of(self, nvec: Sequence[int]) -> np.ndarray:
        """Each head's first logit column, and the total, for ``nvec`` (cached)."""
        key = tuple(nvec)
        if key not in self._offsets:
            self._offsets[key] = np.concatenate([[0], np.cumsum(key)]).astype(np.int64)
        return self._offsets[key]

    def state_dict(self) -> dict:
        return {"counter": self.counter}

    def load_state_dict(self, state: dict) -> None:
        self.counter = int(state.get("counter", 0))


SAMPLERS = {"torch": TorchSampler, "numba": NumbaSampler}


def make_sampler(name: str, seed: int, device: torch.device):
    """The sampler called ``name``; "auto" is numba on the CPU (faster there), torch elsewhere."""
    if name == "auto":
        name = "numba" if device.type == "cpu" else "torch"
    return SAMPLERS[name](seed)
