"""``device-check --full``'s env-level measurements: the lean step (plain launches and CUDA-graph
replay, env-steps/s and host microseconds per step) and the first step of a fresh process."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable

from gpu_envs.benchmarks import report
from gpu_envs.device_check.rows import Row

#: Tag's small config (--quick, --small): 8 agents, a few steps per episode.
SMALL_TAG = dict(
    num_taggers=2,
    num_runners=6,
    episode_length=8,
    grid_length=3.0,
    tagging_distance=0.15,
    use_full_observation=False,
    num_other_agents_observed=3,
)
#: Steps timed without a synchronisation to measure the host's time per step (--full, --small).
HOST_STEPS = 200
SMALL_HOST_STEPS = 3


#: The dtypes a lean row may name (Tag's state is float32 only).
DTYPES = ("float64", "float32")


def check_dtype(game: str, dtype: str | None) -> None:
    """A ValueError unless ``dtype`` is one ``game`` runs in, named: a classic game's default
    dtype depends on the device (float64 on the CPU and the simulator, float32 on a GPU), so a
    row that left it out would measure another dtype on the GPU than everywhere else."""
    allowed = ("float32",) if game == "tag" else DTYPES
    if dtype not in allowed:
        raise ValueError(
            f"the {game} lean row needs its dtype named ({' or '.join(allowed)}), got {dtype!r}: "
            "the default differs between the CPU and a GPU"
        )


def lean_env(game: str, num_envs: int, device: str, small: bool, dtype: str | None):
    """``game``'s env in ``dtype`` on the lean path (``validate_actions=False``,
    ``copy_outputs=False``), reset, and a zero action batch on its device (zeros are valid actions
    of every game)."""
    import torch

    from gpu_envs import games
    from gpu_envs.games.tag.env import TagEnv
    from gpu_envs.games.tag.seed import seed_config

    check_dtype(game, dtype)
    if game == "tag":
        env = TagEnv(
            num_envs, device, validate_actions=False, **(SMALL_TAG if small else seed_config())
        )
    else:
        env_class = games.load(games.GAMES[game].vector_env)
        env = env_class(num_envs, device, dtype=dtype, validate_actions=False)
    env.copy_outputs = False
    env.reset(seed=0)
    shape, action_dtype = env.action_layout()
    return env, torch.zeros(shape, dtype=action_dtype, device=env.device)


def host_us_per_step(
    call: Callable[[], object], sync: Callable[[], object] | None, steps: int = HOST_STEPS
) -> float:
    """Microseconds of host time per ``call()``, over ``steps`` calls not waited for."""
    if sync is not None:
        sync()
    start = time.perf_counter()
    for _ in range(steps):
        call()
    host = time.perf_counter() - start
    if sync is not None:
        sync()
    return 1e6 * host / steps


def lean_throughput(
    game: str, num_envs: int, device: str, small: bool, options: dict, dtype: str
) -> list[Row]:
    """env-steps/s and host us per step of ``game``'s lean step, plain launches and (on a GPU)
    CUDA-graph replay of ``env.step``, timed in interleaved rounds on one env."""
    import torch

    from gpu_envs.benchmarks import timing
    from gpu_envs.engine import cuda_graphs

    env, actions = lean_env(game, num_envs, device, small, dtype)
    dtype_name = str(getattr(env, "dtype", "float32")).removeprefix("torch.")
    if dtype_name != dtype:
        raise RuntimeError(f"the {game} lean row asked for {dtype} and got {dtype_name}")
    sync = torch.cuda.synchronize if env.device.type == "cuda" else None
    runners = {"plain launches": timing.Runner(lambda: env.step(actions), num_envs, sync)}
    why_not = cuda_graphs.capturable(env)
    if why_not is None:
        graph = cuda_graphs.CapturedStep(lambda: env.step(actions), env.device, envs=(env,))
        runners["graph replay"] = timing.Runner(graph.replay, num_envs, sync)
    results = timing.measure_rounds(runners, **options)
    where = f"{num_envs} envs, {dtype_name}"
    rows = []
    for name, result in results.items():
        host_us = host_us_per_step(
            runners[name].call, sync, SMALL_HOST_STEPS if small else HOST_STEPS
        )
        rows.append(
            Row(
                f"{game} lean step",
                f"{where}, {name}",
                f"{report.format_rate(result.env_steps_per_s)} env-steps/s; host {host_us:.1f} "
                "us per step",
                "",
                {
                    "kind": "throughput",
                    "game": game,
                    "num_envs": num_envs,
                    "dtype": dtype_name,
                    "launch": name,
                    "host_us_per_step": host_us,
                    **result.to_dict(),
                },
            )
        )
    if why_not is not None:
        rows.append(Row(f"{game} lean step", f"{where}, graph replay", f"not run: {why_not}"))
    env.close()
    return rows


def first_step_rows(
    game: str, device: str, num_envs: int, env_kwargs: dict, cold: bool = True
) -> list[Row]:
    """The first step of a fresh process on ``device``, with an empty kernel cache (cold), then
    with the cache the first process filled (warm). ``cold=False`` (CI) keeps numba's own cache
    folder: the first run finds what earlier runs left there. ``env_kwargs`` name CartPole's
    dtype (:func:`check_dtype`)."""
    from gpu_envs.benchmarks.cartpole import measure_first_step

    dtype = "float32" if game == "tag" else env_kwargs.get("dtype")
    check_dtype(game, dtype)
    env_class = {"cartpole": "CartPoleVectorEnv", "tag": "TagEnv"}[game]
    with tempfile.TemporaryDirectory() as cache:
        records = measure_first_step(
            device, 2, env_class, env_kwargs, sizes=(num_envs,), cache_dir=cache if cold else None
        )
    return [
        Row(
            "first step",
            f"{game}, {num_envs} envs, {dtype}, fresh process, {cache} kernel cache",
            f"{r['first_step_s']:.3f} s (make and reset {r['make_and_reset_s']:.2f} s, import "
            f"{r['import_s']:.2f} s)",
            "",
            {**r, "game": game, "dtype": dtype, "cache": cache},
        )
        for r, cache in zip(records, ("cold" if cold else "existing", "warm"))
    ]
