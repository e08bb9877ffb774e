"""The range check of integer actions, one njit kernel on CPU arrays: what
:mod:`gpu_envs.engine.validation` runs on integer actions before a step, and what the CPU step
loops (:mod:`gpu_envs.kernels.cpu`) run on the actions they read in place (one pass, no
temporaries; compiled with the loops' options, so it allocates nothing)."""

import numba
import numpy as np


@numba.njit(cache=True, error_model="numpy", _nrt=False)
def any_out_of_range(values, upper):
    """Whether an entry ``values[row, head]`` lies outside ``[0, upper[head]]`` (one
    branch-free pass per head; a negative entry seen as unsigned is above any bound)."""
    bad = np.uint64(0)
    for head in range(values.shape[1]):
        high = np.uint64(upper[head])
        for row in range(values.shape[0]):
            bad |= np.uint64(np.uint64(values[row, head]) > high)
    return bad != 0
