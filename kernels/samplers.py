"""The trainers' action samplers as njit kernels on CPU arrays (used by
:mod:`gpu_envs.trainers.sampling`): counter-based draws from :mod:`gpu_envs.kernels.rng`, so a
sample depends only on its seed, call counter and position."""

import numba
import numpy as np

from gpu_envs.kernels.rng import uniform01


@numba.njit(cache=True)
def sample_categorical(logits, offsets, seed, counter, out):
    """Inverse-CDF sampling of softmax(logits) per row and head ([B, sum(nvec)]) into ``out`` [B,
    H]."""
    rows, heads = out.shape
    for b in range(rows):
        for h in range(heads):
            lo = offsets[h]
            hi = offsets[h + 1]
            top = logits[b, lo]
            for j in range(lo + 1, hi):
                top = max(top, logits[b, j])
            total = 0.0
            for j in range(lo, hi):
                total += np.exp(np.float64(logits[b, j] - top))
            threshold = uniform01(seed, counter, np.uint64(b * heads + h)) * total
            acc = 0.0
            choice = hi - lo - 1
            for j in range(lo, hi):
                acc += np.exp(np.float64(logits[b, j] - top))
                if threshold < acc:
                    choice = j - lo
                    break
            out[b, h] = choice


@numba.njit(cache=True)
def sample_normal(params, seed, counter, out):
    """Box-Muller draws ``mean + exp(log_std) * z`` from Gaussian parameters [B, 2 * D] into ``out``
    [B, D]."""
    rows, dims = out.shape
    for b in range(rows):
        for d in range(dims):
            draw = np.uint64(2 * (b * dims + d))
            radius = np.sqrt(-2.0 * np.log(1.0 - uniform01(seed, counter, draw)))
            z = radius * np.cos(2.0 * np.pi * uniform01(seed, counter, draw + np.uint64(1)))
            out[b, d] = params[b, d] + np.exp(np.float64(params[b, dims + d])) * z
