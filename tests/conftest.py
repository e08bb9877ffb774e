"""Shared pytest set-up: CUDA-kernel tests run only under the simulator or on a GPU."""

import os

import pytest
from hypothesis import HealthCheck, settings

# No hypothesis time limits anywhere (per-example deadline, slow-generation health check): they fail
# on a loaded machine.
settings.register_profile(
    "no-time-limits", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("no-time-limits")

CUDA_KERNELS_RUNNABLE = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
if not CUDA_KERNELS_RUNNABLE:
    try:
        from numba import cuda

        CUDA_KERNELS_RUNNABLE = cuda.is_available()
    except Exception:
        CUDA_KERNELS_RUNNABLE = False


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(
        reason="needs NUMBA_ENABLE_CUDASIM=1 (set before Python starts) or a GPU"
    )
    for item in items:
        if "cudasim" in item.keywords and not CUDA_KERNELS_RUNNABLE:
            item.add_marker(skip)


def _assert_matches_cpu(expected, actual, what: str) -> None:
    """A CUDA-env tensor against the CPU env's: bit for bit in the simulator (it runs the same
    Python) and for integers and flags; floats within 1e-4 on a real GPU (FMA, libdevice)."""
    import numpy as np
    import torch

    from gpu_envs.engine import devices

    actual = actual.cpu()
    if devices.simulated_cuda() or not expected.is_floating_point():
        assert torch.equal(actual, expected), f"{what} differs"
    else:
        np.testing.assert_allclose(
            actual.numpy(), expected.numpy(), rtol=0, atol=1e-4, err_msg=what
        )


def _assert_envs_match(cpu_env, cuda_env, where: str) -> None:
    """Every buffer of ``state_snapshot()`` (see :func:`_assert_matches_cpu`)."""
    cuda_state = cuda_env.state_snapshot()
    for name, expected in cpu_env.state_snapshot().items():
        _assert_matches_cpu(expected, cuda_state[name], f"buffer {name} at {where}")


@pytest.fixture
def assert_matches_cpu():
    return _assert_matches_cpu


@pytest.fixture
def assert_envs_match():
    return _assert_envs_match


@pytest.fixture
def one_thread():
    """torch on one thread for the test (training tests: a 2-core machine, reproducible)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
