"""Compile every game's CUDA kernels to PTX for sm_80 and sm_90, without a GPU.

The CUDA simulator runs kernels as Python and checks no types; compiling to PTX catches typing and
lowering errors. Needs NVRTC/NVVM (the `ptx` extra). Fails loudly if they cannot be found.
The launch signatures are the types of the arguments a real env hands its driver: a small CPU env
of each game of the registry (and dtype) is built, and its kernel arguments are typed with
``numba.typeof``.
"""

import inspect
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import numba
import numba.cuda.dispatcher as cuda_dispatcher
import torch
from numba import config, cuda, types

from gpu_envs.engine.kernel_env import KernelEnv
from gpu_envs.games import GAMES, load
from gpu_envs.kernels import cuda as cuda_drivers

COMPUTE_CAPABILITIES = [(8, 0), (9, 0)]
NUM_ENVS = 2
#: Parameters beyond a game's defaults (Tag's partial observation: the kNN kernels too).
GAME_PARAMS = {"tag": {"use_full_observation": False, "num_other_agents_observed": 3}}


def envs() -> Iterator[KernelEnv]:
    """A small CPU env of every game of ``gpu_envs.games.GAMES`` (the env its trainer builds), in
    float32 and in float64 where the game takes a ``dtype``."""
    for name, record in GAMES.items():
        env_class = load(record.trainer_env or record.vector_env)
        params = GAME_PARAMS.get(name, {})
        if "dtype" in inspect.signature(env_class).parameters:
            for dtype in (torch.float32, torch.float64):
                yield env_class(NUM_ENVS, dtype=dtype, **params)
        else:
            yield env_class(NUM_ENVS, **params)


def kernel_signatures(env) -> list[tuple]:
    """``[(python_function, signature), ...]`` of the env's step and reset kernels."""
    logic = env.logic
    driver = cuda_drivers.make_driver(
        env.game,
        logic.step_envs,
        logic.reset_envs,
        logic.KernelArgs,
        env.cuda_shape,
        env.cuda_shared_slots,
    )
    args = types.Tuple([numba.typeof(value) for value in env.kernel_args])
    return [
        (driver.step_function, (types.int64, args)),
        (driver.reset_function, (types.int64, types.boolean[::1], args)),
    ]


def main() -> int:
    if config.ENABLE_CUDASIM:
        print("ptx_check: unset NUMBA_ENABLE_CUDASIM, the simulator cannot compile PTX")
        return 2
    compiled = 0
    for env in envs():
        for capability in COMPUTE_CAPABILITIES:
            # Device functions are compiled for the "current device"; with no GPU, answer for it.
            cuda_dispatcher.get_current_device = lambda cc=capability: SimpleNamespace(
                compute_capability=cc
            )
            for pyfunc, signature in kernel_signatures(env):
                ptx, _ = cuda.compile_ptx(pyfunc, signature, cc=capability)
                assert f".target sm_{capability[0]}{capability[1]}" in ptx
                compiled += 1
                print(
                    f"ptx_check: {pyfunc.__name__} ({env.__class__.__name__}) "
                    f"sm_{capability[0]}{capability[1]} ok"
                )
    print(f"ptx_check: {compiled} kernel compilations ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
