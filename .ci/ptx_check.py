"""Compile every CUDA kernel of gpu-envs to PTX for sm_80 and sm_90, without a GPU.

The CUDA simulator runs kernels as Python and checks no types; compiling to PTX catches typing and
lowering errors. Needs NVRTC/NVVM (the `ptx` extra). Fails loudly if they cannot be found.
Each kernel module lists its kernels and launch signatures in ``ptx_signatures()``.
"""

import importlib
import sys
from types import SimpleNamespace

import numba.cuda.dispatcher as cuda_dispatcher
from numba import config, cuda

KERNEL_MODULES = ["gpu_envs.kernels.cartpole_cuda", "gpu_envs.kernels.tag_cuda"]
COMPUTE_CAPABILITIES = [(8, 0), (9, 0)]


def main() -> int:
    if config.ENABLE_CUDASIM:
        print("ptx_check: unset NUMBA_ENABLE_CUDASIM, the simulator cannot compile PTX")
        return 2
    compiled = 0
    for module_name in KERNEL_MODULES:
        module = importlib.import_module(module_name)
        for capability in COMPUTE_CAPABILITIES:
            # Device functions are compiled for the "current device"; with no GPU, answer for it.
            cuda_dispatcher.get_current_device = lambda cc=capability: SimpleNamespace(compute_capability=cc)
            for pyfunc, signature in module.ptx_signatures():
                ptx, _ = cuda.compile_ptx(pyfunc, signature, cc=capability)
                assert f".target sm_{capability[0]}{capability[1]}" in ptx
                compiled += 1
                print(f"ptx_check: {module_name}.{pyfunc.__name__} sm_{capability[0]}{capability[1]} ok")
    print(f"ptx_check: {compiled} kernel compilations ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
