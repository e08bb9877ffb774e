"""The parity tolerances hold for a correct kernel under the GPU's last-bit drift, and catch a
real error: a CPU env whose floats are nudged by 1-4 ulps (``np.nextafter``) before and after
every step (the model of a GPU step: the same computation, rounded differently) passes against an
exact CPU env for every game and dtype; one with a planted error of 1e-3 fails.

What drifts: every float of the classic games (their steps go through sin/cos and multiply-adds
that the GPU contracts into FMAs); Tag's positions and what is computed from them (observation,
rewards), through the float64 cos/sin of its move. Tag's heading, speed and acceleration are sums
of table entries, clipped and wrapped (``fmod``): correctly rounded IEEE operations, the same
bits on every device, so they are not nudged (a heading of exactly 0 nudged below it would wrap
to 2 pi, a difference no GPU makes).

Run free (``from_same_state=False``, the check before issue 46), the nudges compound through the
dynamics: Pendulum in float32 then fails although nothing is wrong, which is why each step is
compared from the same state."""

import numpy as np
import pytest
import torch

from gpu_envs import games
from gpu_envs.benchmarks.parity import compare_envs, random_actions
from gpu_envs.device_check.lean import SMALL_TAG
from gpu_envs.games.tag.env import TagEnv

NUM_ENVS, STEPS, EPISODE = 256, 200, 50
CLASSIC = [name for name in games.GAMES if name != "tag"]
#: Tag's buffers a GPU may round differently (see the module).
TAG_DRIFTS = ("x", "y", "obs", "final_obs", "rewards")
CASES = [(name, dtype) for name in CLASSIC for dtype in ("float64", "float32")] + [
    ("tag", "float32")
]


def make(game: str, dtype: str):
    if game == "tag":
        return TagEnv(32, **SMALL_TAG)
    env_class = games.load(games.GAMES[game].vector_env)
    return env_class(NUM_ENVS, dtype=dtype, max_episode_steps=EPISODE)


def nudged(tensor: torch.Tensor, rng: np.random.Generator, drifts: bool = True) -> torch.Tensor:
    """``tensor`` with each finite float moved by 1 to 4 ulps up or down (others, and all when
    not ``drifts``, as they are)."""
    if not (drifts and tensor.is_floating_point()):
        return tensor
    values = tensor.numpy().copy()
    steps = rng.integers(1, 5, values.shape)
    toward = np.where(rng.random(values.shape) < 0.5, -np.inf, np.inf).astype(values.dtype)
    finite = np.isfinite(values)
    for k in range(1, 5):
        move = finite & (steps >= k)
        values[move] = np.nextafter(values[move], toward[move])
    return torch.from_numpy(values)


class Drifting:
    """``env`` as a GPU might compute it: its floats nudged by 1-4 ulps when its state is loaded
    and after every reset and step; ``planted`` is added to the first float of every buffer after
    every step (a wrong kernel)."""

    def __init__(self, env, seed: int, planted: float = 0.0):
        self.env, self.rng, self.planted = env, np.random.default_rng(seed), planted

    def __getattr__(self, name):
        return getattr(self.env, name)

    def _nudged(self, state: dict) -> dict:
        tag = isinstance(self.env, TagEnv)
        return {n: nudged(t, self.rng, not tag or n in TAG_DRIFTS) for n, t in state.items()}

    def _drift(self, result: tuple, planted: float) -> tuple:
        state = self.env.buffers_state()
        for tensor in state.values():
            if tensor.is_floating_point():
                tensor.view(-1)[0] += planted
        self.env.load_buffers_state(self._nudged(state))
        obs, *rest = result
        return (nudged(obs, self.rng), *rest)

    def reset(self, **kwargs):
        return self._drift(self.env.reset(**kwargs), 0.0)

    def step(self, actions):
        return self._drift(self.env.step(actions), self.planted)

    def load_buffers_state(self, state):
        self.env.load_buffers_state(self._nudged(state))


def _compare(game: str, dtype: str, planted: float = 0.0, **options):
    reference, candidate = make(game, dtype), Drifting(make(game, dtype), 1, planted)
    generator = torch.Generator().manual_seed(0)
    try:
        return compare_envs(
            reference,
            candidate,
            lambda _: random_actions(reference, generator),
            STEPS if game != "tag" else 80,
            seed=0,
            **options,
        )
    finally:
        reference.close()
        candidate.close()


@pytest.mark.parametrize(("game", "dtype"), CASES)
def test_a_correct_kernel_drifting_by_ulps_passes(game, dtype):
    report = _compare(game, dtype)
    assert report.verdict == "PASS", report.summary()
    assert any(report.max_abs_diff().values())  # the drift was there to see


@pytest.mark.parametrize(("game", "dtype"), CASES)
def test_a_planted_error_of_1e_3_fails(game, dtype):
    report = _compare(game, dtype, planted=1e-3)
    assert report.verdict == "FAIL"
    assert report.mismatches[0].step == 1


def test_running_free_the_drift_of_pendulum_grows_past_the_tolerance():
    report = _compare("pendulum", "float32", from_same_state=False)
    assert report.verdict == "FAIL"
