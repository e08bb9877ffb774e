"""Shared pytest set-up: CUDA-kernel tests run only under the simulator or on a GPU."""

import os

import pytest

CUDA_KERNELS_RUNNABLE = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
if not CUDA_KERNELS_RUNNABLE:
    try:
        from numba import cuda

        CUDA_KERNELS_RUNNABLE = cuda.is_available()
    except Exception:  # noqa: BLE001 - any driver problem means "no GPU here"
        CUDA_KERNELS_RUNNABLE = False


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs NUMBA_ENABLE_CUDASIM=1 (set before Python starts) or a GPU")
    for item in items:
        if "cudasim" in item.keywords and not CUDA_KERNELS_RUNNABLE:
            item.add_marker(skip)
