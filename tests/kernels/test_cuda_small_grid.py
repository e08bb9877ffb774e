"""A launch of fewer than 128 blocks (a few envs, Tag's games, a partial reset) raises no
``NumbaPerformanceWarning``: numba-cuda warns when it configures such a launch, before any GPU is
needed, so the real dispatcher is configured here with its launch itself faked (no GPU)."""

import warnings

import numpy as np
import pytest
from numba import config
from numba.extending import register_jitable

from gpu_envs.kernels import cuda as drivers

pytestmark = pytest.mark.skipif(
    bool(config.ENABLE_CUDASIM), reason="numba-cuda's dispatcher (the simulator's does not warn)"
)


@register_jitable
def _step_envs(start, stop, args):
    pass


@register_jitable
def _reset_envs(start, stop, mask, args):
    pass


def _kernel_args(*args):
    return args


@pytest.mark.parametrize("shape", ["thread", "block"])
def test_small_grids_launch_without_a_performance_warning(monkeypatch, shape):
    name = f"small_grid_{shape}"
    driver = drivers.make_driver(name, _step_envs, _reset_envs, _kernel_args, shape)
    launches = []
    for kernel in (driver.reset_kernel, driver.step_kernel):
        monkeypatch.setattr(kernel, "call", lambda args, launch: launches.append(launch.griddim))
    monkeypatch.setattr(drivers.PreparedLaunch, "of", classmethod(_refuse))
    mask = np.ones(8, dtype=np.bool_)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        driver.reset(8, mask, (), num_agents=4)
        with pytest.warns(drivers.LaunchFallbackWarning):  # the step's ordinary launch
            step = driver.prepare_step(8, (), num_agents=4)
        step(0)
    assert [grid[0] for grid in launches] == ([1, 1] if shape == "thread" else [8, 8])


def _refuse(cls, *args, **kwargs):
    raise RuntimeError("no GPU")


def test_other_warnings_still_show():
    """The filter is scoped to the small-grid message."""
    with pytest.warns(UserWarning, match="other"):
        drivers.configured(_Warns(), (1, 32, 0))


class _Warns:
    def __getitem__(self, launch_config):
        warnings.warn("other", UserWarning, stacklevel=2)
