"""The range check of integer actions, an njit kernel on CPU arrays: what
:mod:`gpu_envs.engine.validation`
runs on integer actions held on the CPU before a step (one pass, no temporaries)."""

import numba


@numba.njit(cache=True)
def any_out_of_range(values, upper):
    """Whether any ``values[r, h]`` lies outside ``[0, upper[h]]``."""
    bad = False
    for head in range(values.shape[1]):
        high = upper[head]
        for row in range(values.shape[0]):
            bad |= (values[row, head] < 0) | (values[row, head] > high)
    return bad
