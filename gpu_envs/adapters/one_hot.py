"""One-hot actions as the indices an engine env takes, checked without a host read of their own.

Libraries that sample discrete actions as one-hot blocks (TorchRL's ``OneHot`` / ``MultiOneHot``
specs, rsl_rl's one-hot rows) hand the adapters blocks of 0s and one 1. Checking every block and
raising when one is not one-hot would read a flag back to the host at every step (a
synchronisation on a GPU). Instead :func:`folded_indices` maps a block that is not one-hot to the
index ``n`` (its size), which the engine's own action check refuses in the one read it makes
anyway, before any env moves; the adapter then rewords that error (checking the blocks again on
that error path only).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpu_envs.engine.kernel_env import KernelEnv
from gpu_envs.games.tag.env import TagEnv

#: The engine's action checks that refuse an index out of range (when they validate actions).
_INDEX_CHECKS = (KernelEnv.check_actions, TagEnv.check_actions)


def is_one_hot(blocks: torch.Tensor) -> torch.Tensor:
    """Whether each block (the last dimension of ``blocks``) holds one 1 and 0s elsewhere."""
    ones = blocks == 1
    return ((blocks == 0) | ones).all(dim=-1) & (ones.sum(dim=-1) == 1)


def folded_indices(actions: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
    """[..., H] int64: the index of the 1 of each one-hot block of ``actions`` [..., sum(nvec)]
    (block h has ``nvec[h]`` entries), or ``nvec[h]``, an index out of range, for a block that is
    not one-hot."""
    numbers = actions.to(torch.uint8) if actions.dtype == torch.bool else actions
    indices = [
        torch.where(is_one_hot(block), block.argmax(dim=-1), n)
        for block, n in zip(numbers.split(list(nvec), dim=-1), nvec)
    ]
    return torch.stack(indices, dim=-1)


def engine_refuses_bad_indices(env) -> bool:
    """Whether ``env`` (a vector env, or a wrapper of one) is an engine env with one of the
    engine's own action checks, which refuse an index out of range (when they validate actions);
    an env that overrides its check may not."""
    engine = getattr(env, "unwrapped", env)
    return isinstance(engine, KernelEnv) and type(engine).check_actions in _INDEX_CHECKS
