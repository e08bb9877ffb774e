"""A counter-based random number generator usable from njit, CUDA kernels and the CUDA simulator.

Every draw is a pure function of ``(seed, episode, index)``: no generator state is carried from one
call to the next, so the start state of env ``i``'s ``e``-th episode does not depend on how many
envs
run beside it, on thread scheduling, or on the backend. The hash is SplitMix64's finaliser.
All operands are ``np.uint64`` so that the three targets agree bit for bit.
"""

import numpy as np

from gpu_envs.kernels.targets import kernel_function

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL_1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL_2 = np.uint64(0x94D049BB133111EB)
_EPISODE_STRIDE = np.uint64(0xD6E8FEB86659FD93)
_SHIFT_30 = np.uint64(30)
_SHIFT_27 = np.uint64(27)
_SHIFT_31 = np.uint64(31)
_SHIFT_11 = np.uint64(11)
_TWO_POW_MINUS_53 = np.float64(1.0 / 9007199254740992.0)


@kernel_function
def mix64(z):
    """SplitMix64 finaliser: a bijective avalanche hash of one uint64."""
    z = (z ^ (z >> _SHIFT_30)) * _MUL_1
    z = (z ^ (z >> _SHIFT_27)) * _MUL_2
    return z ^ (z >> _SHIFT_31)


@kernel_function
def random_bits(seed, episode, index):
    """64 random bits for draw ``index`` of ``episode`` of the stream ``seed`` (all uint64)."""
    key = mix64(np.uint64(seed) + _GOLDEN) ^ (np.uint64(episode) * _EPISODE_STRIDE)
    return mix64(key + (np.uint64(index) + np.uint64(1)) * _GOLDEN)


@kernel_function
def uniform01(seed, episode, index):
    """A float64 uniform in [0, 1) with 53 random bits."""
    return np.float64(random_bits(seed, episode, index) >> _SHIFT_11) * _TWO_POW_MINUS_53
