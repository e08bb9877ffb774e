"""The global generators seeded from a run's seed, whatever its size in the config's range.

Lightning's ``seed_everything`` refuses seeds outside NumPy's [0, 2**32 - 1], while the run
config's seeds go up to 2**63 - 1 (those of the engine's envs, as gymnasium's ``reset(seed=)``
takes large ints too).
"""

from __future__ import annotations

import torch
from lightning.fabric.utilities.seed import seed_everything as lightning_seed_everything

#: How many seeds NumPy's global generator takes: [0, 2**32 - 1].
NUMPY_SEEDS = 2**32


def seed_everything(seed: int, verbose: bool = False) -> None:
    """Seed torch's generators (every device) with ``seed`` (up to 2**64 - 1) and Python's and
    NumPy's global ones with ``seed % 2**32``: a seed below 2**32 seeds all of them as
    Lightning's ``seed_everything(seed)`` does, and the same seed always seeds them the same."""
    lightning_seed_everything(seed % NUMPY_SEEDS, verbose=verbose)
    torch.manual_seed(seed)
