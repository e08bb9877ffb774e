"""The global generators seeded from a run's seed, whatever its size in the config's range.

Lightning's ``seed_everything`` refuses seeds outside NumPy's [0, 2**32 - 1], while the run
config's seeds go up to 2**63 - 1 (those of the engine's envs, as gymnasium's ``reset(seed=)``
takes large ints too). This seeds what it seeds, and sets the environment variables its DDP
launchers read, without importing Lightning (2-3 s of a one-process run's start).
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

#: How many seeds NumPy's global generator takes: [0, 2**32 - 1].
NUMPY_SEEDS = 2**32


def seed_everything(seed: int) -> None:
    """Seed torch's generators (every device) with ``seed`` (up to 2**64 - 1) and Python's and
    NumPy's global ones with ``seed % 2**32``: a seed below 2**32 seeds all of them as
    Lightning's ``seed_everything(seed)`` does (``PL_GLOBAL_SEED`` and ``PL_SEED_WORKERS`` too),
    and the same seed always seeds them the same."""
    small = seed % NUMPY_SEEDS
    os.environ["PL_GLOBAL_SEED"] = str(small)
    random.seed(small)
    np.random.seed(small)
    torch.manual_seed(seed)
    os.environ["PL_SEED_WORKERS"] = "0"
