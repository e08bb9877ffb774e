"""Compile every game's CUDA kernels to PTX for sm_80 and sm_90, without a GPU.

The CUDA simulator runs kernels as Python and checks no types; compiling to PTX catches typing and
lowering errors. Needs NVRTC/NVVM (the `ptx` extra). Fails loudly if they cannot be found.
The launch signatures are the types of the arguments a real env hands its driver: a small CPU env
of each game of the registry (and dtype) is built, and its kernel arguments are typed with
``numba.typeof``.

It also asserts, from the PTX, parity by construction (:data:`UNFUSED`: the kernels whose
products decide discrete outcomes hold no fused multiply-add, i.e. every such product is a
``gpu_envs.kernels.rounding.mul_rn``) and that a float32 env steps in float32 (its step kernel
holds no ``fma.rn.f64``: libdevice's float64 sin/cos are built on it).

PTX is not the end: ptxas, compiling it to machine code, may itself fuse a ``mul.f32`` whose
result an ``add.f32`` / ``sub.f32`` takes into one FFMA (PTX's ``mul``/``add`` without a rounding
modifier allow it; ``mul.rn`` / ``add.rn``, what ``mul_rn`` emits, do not). So the kernels of
:data:`UNFUSED` must also hold no such pair (:func:`contractible_pairs`) of the widths they
forbid.
"""

import collections
import inspect
import re
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

FMA_F32, FMA_F64 = "fma.rn.f32", "fma.rn.f64"
#: The fused multiply-adds a kernel must not hold: ``(game, kernel) -> instructions``. NVVM fuses
#: ``a * b + c`` into one ``fma.rn`` (one rounding) where the CPU rounds twice; where the bits
#: decide a discrete outcome the logic multiplies with ``mul_rn``, which is never fused. Tag:
#: positions, squared distances (neighbour order, tags) and rewards are float32, and its only
#: FMAs are libdevice's float64 cos/sin (fma.rn.f64); its reset and the resets of the games whose
#: reset has no trigonometry (the start-state draw ``low + mul_rn(high - low, u)``) hold none.
UNFUSED = {
    ("tag", "step"): (FMA_F32,),
    ("tag", "reset"): (FMA_F32, FMA_F64),
    ("cartpole", "reset"): (FMA_F32, FMA_F64),
    ("mountain_car", "reset"): (FMA_F32, FMA_F64),
    ("mountain_car_continuous", "reset"): (FMA_F32, FMA_F64),
}


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
    """``[(kernel, python_function, signature), ...]`` of the env's ``"step"`` and ``"reset"``
    kernels."""
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
        ("step", driver.step_function, (types.int64, args)),
        ("reset", driver.reset_function, (types.int64, types.boolean[::1], args)),
    ]


def fused_multiply_adds(ptx: str) -> collections.Counter:
    """How many of each ``fma.rn`` instruction (``fma.rn.f32``, ``fma.rn.f64``) ``ptx`` holds."""
    return collections.Counter(re.findall(r"\bfma\.rn\.f(?:32|64)\b", ptx))


_PLAIN_MUL = re.compile(r"^\s*mul\.(f32|f64)\s+(%\w+),")
_PLAIN_ADD = re.compile(r"^\s*(?:add|sub)\.(f32|f64)\s+%\w+,\s*([^;]*);")


def contractible_pairs(ptx: str) -> collections.Counter:
    """How many plain ``add``/``sub`` of each width (``fma.rn.f32``, ``fma.rn.f64``: what ptxas
    would make of them) take the result of a plain ``mul`` of that width in ``ptx``: the pairs
    ptxas may fuse into one FMA."""
    products: dict[str, str] = {}
    pairs: collections.Counter = collections.Counter()
    for line in ptx.splitlines():
        if match := _PLAIN_MUL.match(line):
            products[match.group(2)] = match.group(1)
        elif match := _PLAIN_ADD.match(line):
            width = match.group(1)
            operands = [operand.strip() for operand in match.group(2).split(",")]
            if any(products.get(operand) == width for operand in operands):
                pairs[f"fma.rn.{width}"] += 1
    return pairs


def contraction_errors(game: str, kernel: str, ptx: str, dtype=None) -> list[str]:
    """The rules broken by the PTX of ``game``'s ``kernel`` (an env of ``dtype``): one line per
    forbidden instruction found, or pair that ptxas may fuse into one (:data:`UNFUSED`; no
    ``fma.rn.f64`` in the step of a float32 env: its start-state draw, in the reset, is float64
    by design)."""
    found = fused_multiply_adds(ptx)
    errors = [
        f"{game} {kernel} kernel: {found[fma]} x {fma} (a product that decides an outcome was "
        "fused: multiply with gpu_envs.kernels.rounding.mul_rn)"
        for fma in UNFUSED.get((game, kernel), ())
        if found[fma]
    ]
    pairs = contractible_pairs(ptx)
    errors += [
        f"{game} {kernel} kernel: {pairs[fma]} plain mul -> add/sub pair(s) that ptxas may fuse "
        f"into {fma} (a product that decides an outcome: multiply with "
        "gpu_envs.kernels.rounding.mul_rn)"
        for fma in UNFUSED.get((game, kernel), ())
        if pairs[fma]
    ]
    if kernel == "step" and dtype == torch.float32 and found[FMA_F64]:
        errors.append(
            f"{game} {kernel} kernel (float32): {found[FMA_F64]} x {FMA_F64} (float64 math in a "
            "float32 env: take it in the state's precision, e.g. gpu_envs.kernels.targets.cos)"
        )
    return errors


def main() -> int:
    if config.ENABLE_CUDASIM:
        print("ptx_check: unset NUMBA_ENABLE_CUDASIM, the simulator cannot compile PTX")
        return 2
    compiled = 0
    errors: list[str] = []
    for env in envs():
        for capability in COMPUTE_CAPABILITIES:
            # Device functions are compiled for the "current device"; with no GPU, answer for it.
            cuda_dispatcher.get_current_device = lambda cc=capability: SimpleNamespace(
                compute_capability=cc
            )
            for kernel, pyfunc, signature in kernel_signatures(env):
                ptx, _ = cuda.compile_ptx(pyfunc, signature, cc=capability)
                assert f".target sm_{capability[0]}{capability[1]}" in ptx
                compiled += 1
                fmas = fused_multiply_adds(ptx)
                dtype = getattr(env, "dtype", None)
                broken = contraction_errors(env.game, kernel, ptx, dtype)
                errors += broken
                ruled = (env.game, kernel) in UNFUSED or (kernel, dtype) == ("step", torch.float32)
                rule = "" if not ruled else " (rules: " + ("broken)" if broken else "ok)")
                print(
                    f"ptx_check: {pyfunc.__name__} ({env.__class__.__name__} "
                    f"{dtype or ''}) sm_{capability[0]}{capability[1]} ok; "
                    f"{fmas[FMA_F32]} {FMA_F32}, {fmas[FMA_F64]} {FMA_F64}{rule}"
                )
    for error in errors:
        print(f"ptx_check: FAIL {error}")
    print(f"ptx_check: {compiled} kernel compilations ok, {len(errors)} contraction errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
