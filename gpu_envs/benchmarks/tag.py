"""Tag throughput: ours on the seed config beside the installed peers, and a 1000-agent scale point.

Ours: ``gpu_envs.TagEnv`` with the seed run config (5 taggers + 100 runners, L = 20, T = 200,
10 acceleration and 10 turn levels, partial observation of the k = 10 nearest, runners exit when
tagged; default NEXT_STEP autoreset, actions validated) stepped with pre-drawn random actions.

Peers, measured in the same run when importable (the optional ``bench`` extra), on the nearest
equivalent workload (configured as in the project's peer harness):

- ``vmas``: VMAS ``simple_tag``, 5 adversaries + 100 good agents, no landmarks, ``bound=10``
  (a 20 x 20 arena), continuous actions, full observation, collisions simulated.
- ``mpe2``: PettingZoo/MPE2 ``simple_tag_v3.parallel_env`` (5 + 100, no obstacles,
  ``num_agent_neighbors=10``, ``max_cycles=200``), a single-game API: num_envs 1 only.
- ``jaxmarl``: JaxMARL ``MPE_simple_tag_v3`` (5 + 100, no obstacles), ``jit(vmap(step))`` per
  call, actions drawn inside the jitted function.

Scale point: the seed config with 10 taggers + 990 runners (N = 1000), ours only.

Throughput: env-steps/s = games advanced by one step per second; agent-steps/s = env-steps/s x
agents per game. Timing protocol: :func:`gpu_envs.benchmarks.timing.measure` (first call timed
apart, warm-up, calibrated repeats, median), one implementation and size at a time: a peer's
larger batches are skipped once one of its steps takes longer than ``--peer-max-step-s``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch

from gpu_envs.benchmarks import machine, report, timing
from gpu_envs.benchmarks.timing import Runner, cycle_pool
from gpu_envs.games.tag.seed import seed_config

SEED_NUM_ENVS = (1, 16, 256, 1024, 4096)
SCALE_NUM_ENVS = (64, 256)
SCALE_TEAMS = (10, 990)  # taggers, runners: N = 1000
PEER_TAGGERS, PEER_RUNNERS = 5, 100


# ------------------------------------------------------------------------------------ ours
def make_ours(
    num_envs: int,
    seed: int,
    *,
    device: str = "cpu",
    validate_actions: bool = True,
    **env_params: Any,
) -> Runner:
    """``TagEnv`` stepped with a pool of pre-drawn random actions."""
    from gpu_envs.games.tag.env import TagEnv

    env = TagEnv(num_envs, device, validate_actions=validate_actions, **env_params)
    env.reset(seed=seed)
    generator = torch.Generator().manual_seed(seed)
    nvec = torch.tensor(env.action_nvec, dtype=torch.int64)
    pool_size = 2 if num_envs * env.num_agents >= 100_000 else 4
    pool = [
        (torch.rand((num_envs, env.num_agents, 2), generator=generator) * nvec)
        .long()
        .to(env.device)
        for _ in range(pool_size)
    ]
    next_actions = cycle_pool(pool)

    p = env.params
    observed = "full" if p.use_full_observation else f"k={p.num_other_agents_observed}"
    config = (
        f"{p.num_taggers} taggers + {p.num_runners} runners, L={p.grid_length:g}, "
        f"T={p.episode_length}, {observed} obs (obs_dim {env.obs_dim}), device {env.device}, "
        f"validate_actions={validate_actions}"
    )
    return Runner(
        lambda: env.step(next_actions()),
        num_envs,
        (lambda: torch.cuda.synchronize(env.device)) if env.device.type == "cuda" else None,
        env.close,
        agents_per_env=env.num_agents,
        config=config,
        meta={"obs_dim": env.obs_dim, "device": str(env.device)},
    )


# ------------------------------------------------------------------------------------ peers
def make_vmas(num_envs: int, seed: int) -> Runner:
    """A :class:`Runner` of VMAS ``simple_tag`` with ``num_envs`` vectorised games."""
    import vmas

    env = vmas.make_env(
        "simple_tag",
        num_envs=num_envs,
        device="cpu",
        continuous_actions=True,
        seed=seed,
        num_good_agents=PEER_RUNNERS,
        num_adversaries=PEER_TAGGERS,
        num_landmarks=0,
        bound=10.0,
    )
    obs = env.reset()
    generator = torch.Generator().manual_seed(seed)
    pool = [
        [torch.rand(num_envs, 2, generator=generator) * 2 - 1 for _ in env.agents] for _ in range(4)
    ]
    next_actions = cycle_pool(pool)
    return Runner(
        lambda: env.step(next_actions()),
        num_envs,
        agents_per_env=len(env.agents),
        config="simple_tag 5 adversaries + 100 good, 0 landmarks, bound=10 (20x20), continuous, "
        "full obs",
        meta={"obs_dim": sorted({int(o.shape[-1]) for o in obs}), "version": vmas.__version__},
    )


def make_mpe2(num_envs: int, seed: int) -> Runner:
    """A :class:`Runner` of one PettingZoo/MPE2 ``simple_tag_v3`` game."""
    if num_envs != 1:
        raise ValueError("PettingZoo/MPE2 is a single-game API: num_envs must be 1")
    from mpe2 import simple_tag_v3

    env = simple_tag_v3.parallel_env(
        num_good=PEER_RUNNERS,
        num_adversaries=PEER_TAGGERS,
        num_obstacles=0,
        num_agent_neighbors=10,
        max_cycles=200,
        continuous_actions=False,
    )
    obs, _ = env.reset(seed=seed)
    agents = list(env.agents)
    rng = np.random.default_rng(seed)
    pool = [{agent: int(rng.integers(5)) for agent in agents} for _ in range(16)]
    next_actions = cycle_pool(pool)

    def call() -> None:
        env.step(next_actions())
        if not env.agents:
            env.reset()

    return Runner(
        call,
        1,
        close=env.close,
        agents_per_env=len(agents),
        config="simple_tag_v3 5 adversaries + 100 good, 0 obstacles, "
        "num_agent_neighbors=10, max_cycles=200, discrete",
        meta={"obs_dim": sorted({int(o.shape[-1]) for o in obs.values()})},
    )


def make_jaxmarl(num_envs: int, seed: int) -> Runner:
    """A :class:`Runner` of JaxMARL ``MPE_simple_tag_v3``: ``jit(vmap(step))`` over ``num_envs``."""
    import jax
    import jaxmarl

    env = jaxmarl.make(
        "MPE_simple_tag_v3", num_good_agents=PEER_RUNNERS, num_adversaries=PEER_TAGGERS, num_obs=0
    )
    key, reset_key = jax.random.split(jax.random.PRNGKey(seed))
    _, state = jax.jit(jax.vmap(env.reset))(jax.random.split(reset_key, num_envs))
    agents = list(env.agents)
    batched_step = jax.vmap(env.step)

    def one_step(key, state):
        key, action_key, step_key = jax.random.split(key, 3)
        action_keys = jax.random.split(action_key, len(agents))
        actions = {
            a: jax.random.randint(action_keys[i], (num_envs,), 0, 5) for i, a in enumerate(agents)
        }
        obs, state, rewards, dones, _ = batched_step(
            jax.random.split(step_key, num_envs), state, actions
        )
        return (key, state), (obs, rewards, dones)

    jitted = jax.jit(one_step)
    box: dict[str, Any] = {"carry": (key, state), "out": None}

    def call() -> None:
        box["carry"], box["out"] = jitted(*box["carry"])

    return Runner(
        call,
        num_envs,
        lambda: jax.block_until_ready(box["carry"]),
        agents_per_env=len(agents),
        config="MPE_simple_tag_v3 5 adversaries + 100 good, 0 obstacles, "
        "jit(vmap(step)) per call, 25-step episodes, full obs",
    )


PEERS: dict[str, tuple[str, Callable[[int, int], Runner], str]] = {
    "vmas": ("vmas", make_vmas, "VMAS simple_tag (torch CPU)"),
    "mpe2": ("mpe2", make_mpe2, "PettingZoo/MPE2 simple_tag_v3, k=10 neighbours"),
    "jaxmarl": ("jaxmarl", make_jaxmarl, "JaxMARL MPE_simple_tag_v3"),
}


# ------------------------------------------------------------------------------------ runs
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``gpu-envs bench tag``."""
    parser.add_argument(
        "--num-envs",
        type=report.parse_int_list,
        default=list(SEED_NUM_ENVS),
        help="seed-config batch sizes (default 1,16,256,1024,4096)",
    )
    parser.add_argument(
        "--scale-num-envs",
        type=report.parse_int_list,
        default=list(SCALE_NUM_ENVS),
        help="batch sizes of the N=1000 scale point (default 64,256; '' skips it)",
    )
    parser.add_argument("--device", default="cpu", help="device of ours: cpu, cuda, cuda:N")
    parser.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"peers to run when importable, from {','.join(PEERS)} ('' for none)",
    )
    parser.add_argument(
        "--peer-max-step-s",
        type=float,
        default=10.0,
        help="skip a peer's larger batches once one batched step takes longer than this",
    )
    parser.add_argument(
        "--no-validate", action="store_true", help="ours with validate_actions=False"
    )
    parser.add_argument("--seed", type=int, default=0)
    report.add_json_argument(parser, "the records")


def _record(
    impl: str, label: str, runner_factory: Callable[[], Runner], num_envs: int
) -> dict[str, Any]:
    record: dict[str, Any] = {"impl": impl, "label": label, "num_envs": num_envs}
    started = time.perf_counter()
    try:
        runner = runner_factory()
    except Exception as error:
        record["error"] = f"{type(error).__name__}: {error}"
        return record
    record["setup_s"] = time.perf_counter() - started
    with runner:
        result = timing.measure(runner, wait_quiet_seconds=5.0, extra_attempts=2).to_dict()
    record.update(
        result,
        agent_steps_per_s=result["env_steps_per_s"] * runner.agents_per_env,
        agents_per_env=runner.agents_per_env,
        config=runner.config,
        meta=runner.meta,
    )
    return record


def _progress(record: dict[str, Any]) -> None:
    if "error" in record:
        text = record["error"]
    else:
        text = (
            f"{record['env_steps_per_s']:,.0f} env-steps/s, "
            f"{record['agent_steps_per_s']:,.0f} agent-steps/s"
        )
    print(f"  {record['label']} num_envs={record['num_envs']}: {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gpu-envs bench tag``: ours and the installed peers, table and JSON."""
    seed_params = seed_config()
    records: list[dict[str, Any]] = []

    def add(impl: str, label: str, factory: Callable[[], Runner], num_envs: int) -> dict[str, Any]:
        record = _record(impl, label, factory, num_envs)
        records.append(record)
        _progress(record)
        return record

    def add_ours(impl: str, label: str, sizes: list[int], params: dict[str, Any]) -> None:
        options = dict(device=args.device, validate_actions=not args.no_validate, **params)
        for n in sizes:
            add(impl, label, partial(make_ours, n, args.seed, **options), n)

    add_ours("ours", "gpu-envs TagEnv", args.num_envs, seed_params)
    missing = []
    for name in [p for p in args.peers.split(",") if p]:
        if name not in PEERS:
            raise SystemExit(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")
        module, factory, label = PEERS[name]
        if importlib.util.find_spec(module) is None:
            missing.append(name)
            continue
        for n in args.num_envs:
            if name == "mpe2" and n != 1:
                continue
            record = add(name, label, partial(factory, n, args.seed), n)
            if "error" not in record and n / record["env_steps_per_s"] > args.peer_max_step_s:
                break
    scale_params = {**seed_params, "num_taggers": SCALE_TEAMS[0], "num_runners": SCALE_TEAMS[1]}
    add_ours("ours_scale", "gpu-envs TagEnv, N=1000", args.scale_num_envs, scale_params)

    out = sys.stderr if args.json == "-" else sys.stdout  # '-': stdout is the JSON's
    print(format_tables(records, args.num_envs, args.scale_num_envs, missing), file=out)
    if args.json:
        document = {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": machine.machine_info(),
            "args": report.settings(args),
            "missing_peers": missing,
            "records": records,
        }
        report.write_json(document, args.json)
    return 0


# ------------------------------------------------------------------------------------ output
def _cell(record: dict[str, Any] | None) -> str:
    if record is None:
        return "—"
    if "error" in record:
        return "error"
    rate = report.format_rate
    return f"{rate(record['env_steps_per_s'])} ({rate(record['agent_steps_per_s'])})"


def format_tables(
    records: list[dict[str, Any]], sizes: list[int], scale_sizes: list[int], missing: list[str]
) -> str:
    """Markdown tables: env-steps/s (agent-steps/s) per implementation and num_envs, the ratio of
    ours to the fastest measured peer, and the scale point."""
    by_impl: dict[str, dict[int, dict[str, Any]]] = {}
    labels: dict[str, str] = {}
    for record in records:
        by_impl.setdefault(record["impl"], {})[record["num_envs"]] = record
        labels[record["impl"]] = record["label"]
    lines = [
        "Tag, seed config (5 taggers + 100 runners, k = 10): env-steps/s (agent-steps/s)",
        "",
        "| impl | " + " | ".join(f"num_envs={n}" for n in sizes) + " | first call (s) |",
        "|---" * (len(sizes) + 2) + "|",
    ]
    peers = [impl for impl in by_impl if impl not in ("ours", "ours_scale")]
    for impl in ["ours", *peers]:
        if impl not in by_impl:
            continue
        row = by_impl[impl]
        first = [r["first_call_s"] for r in row.values() if r.get("first_call_s") is not None]
        first_text = (
            "—"
            if not first
            else f"{min(first):.2g}" + (f"–{max(first):.2g}" if max(first) > min(first) else "")
        )
        lines.append(
            f"| {labels[impl]} | "
            + " | ".join(_cell(row.get(n)) for n in sizes)
            + f" | {first_text} |"
        )
    if peers and "ours" in by_impl:
        ratios = []
        for n in sizes:
            rates = [
                by_impl[p][n]["env_steps_per_s"]
                for p in peers
                if n in by_impl[p] and "error" not in by_impl[p][n]
            ]
            ours = by_impl["ours"].get(n)
            ratios.append(
                f"{ours['env_steps_per_s'] / max(rates):.0f}x"
                if rates and ours and "error" not in ours
                else "—"
            )
        lines.append("| ours / fastest peer | " + " | ".join(ratios) + " | |")
    if missing:
        lines += ["", f"Not installed (optional `bench` extra): {', '.join(missing)}."]
    if "ours_scale" in by_impl:
        row = by_impl["ours_scale"]
        lines += [
            "",
            "Scale point, 10 taggers + 990 runners (N = 1000), k = 10: env-steps/s (agent-steps/s)",
            "",
            "| impl | " + " | ".join(f"num_envs={n}" for n in scale_sizes) + " |",
            "|---" * (len(scale_sizes) + 1) + "|",
            f"| {labels['ours_scale']} | "
            + " | ".join(_cell(row.get(n)) for n in scale_sizes)
            + " |",
        ]
    return "\n".join(lines)
