"""``gpu-envs device-check``: CPU-vs-CUDA parity and CUDA throughput on one GPU, in a few minutes.

Parity: the same seeds and the same random actions are fed to an env on the CPU and one on the GPU,
step by step, with autoresets. Integer state (done flags, episode counters, in-game flags) must
match exactly; floats must stay within a stated tolerance (the GPU compiler fuses multiply-adds, so
the last bits may differ). An env whose integer state differs is counted as diverged and left out
of later comparisons; for CartPole, a divergence where the reference state lay within the float
tolerance of a termination threshold is reported as a rounding flip (WARN), any other as a FAIL.

Throughput: env-steps/s of the CUDA env over a range of batch sizes, synchronised with
``torch.cuda.synchronize`` (protocol of :mod:`gpu_envs.benchmarks.timing`).

Each game contributes a parity function and a throughput function to :func:`plan`; the Tag rows
appear when ``gpu_envs.tag`` is importable. Exit status: 0 all parity checks pass (or only WARN),
1 a parity check failed, 2 no usable CUDA GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Callable

NO_GPU_EXIT = 2
FAIL_EXIT = 1
#: Float tolerance (max abs difference) of CPU-vs-CUDA parity per state dtype.
CARTPOLE_ATOL = {"float64": 1e-10, "float32": 1e-4}
TAG_ATOL = 1e-3


@dataclasses.dataclass
class Row:
    """One line of the report; ``status`` is PASS, WARN or FAIL for checks, empty for measurements."""

    check: str
    setting: str
    result: str
    status: str = ""
    record: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Parity:
    """Outcome of :func:`compare_envs`."""

    num_envs: int
    steps: int
    diverged_envs: int = 0
    rounding_flips: int = 0
    first_divergence_step: int | None = None
    max_abs_diff: dict[str, float] = dataclasses.field(default_factory=dict)

    def status(self, atol: float) -> str:
        """PASS: exact integer state, floats within ``atol``; WARN: only rounding flips; else FAIL."""
        floats_ok = all(diff <= atol for diff in self.max_abs_diff.values())
        if not floats_ok or self.diverged_envs > self.rounding_flips:
            return "FAIL"
        return "WARN" if self.diverged_envs else "PASS"

    def summary(self, atol: float) -> str:
        diffs = ", ".join(f"{name} {diff:.1e}" for name, diff in self.max_abs_diff.items())
        text = f"max |diff|: {diffs} (tol {atol:g}); diverged envs {self.diverged_envs}/{self.num_envs}"
        if self.diverged_envs:
            text += (f" (first at step {self.first_divergence_step}; "
                     f"{self.rounding_flips} at a threshold within tol)")
        return text


Snapshot = Callable[[object, tuple], tuple[dict, dict]]


def compare_envs(reference, candidate, steps: int, make_actions: Callable[[int], object],
                 snapshot: Snapshot, threshold_margin: Callable[[object, tuple], object] | None = None,
                 atol: float = 0.0) -> Parity:
    """Step two envs with the same actions and compare what ``snapshot`` extracts after every step.

    ``snapshot(env, step_result) -> (exact, floats)``: dicts of [num_envs, ...] tensors; ``exact``
    must be equal, ``floats`` are compared by max abs difference over envs that have not diverged.
    ``threshold_margin(env, step_result)`` ([num_envs] distances of the reference to a decision
    threshold) classifies a divergence as a rounding flip when the distance is below ``atol``.
    Step 0 compares the reset outputs (``reset()`` must have been called on both with one seed).
    """
    import torch

    num_envs = reference.num_envs
    parity = Parity(num_envs, steps)
    diverged = torch.zeros(num_envs, dtype=torch.bool)
    for step in range(steps + 1):
        if step == 0:
            ref_out, cand_out = reference.last_reset, candidate.last_reset
        else:
            actions = make_actions(step)
            ref_out = reference.step(actions)
            cand_out = candidate.step(actions.to(candidate.device))
        ref_exact, ref_floats = snapshot(reference, ref_out)
        cand_exact, cand_floats = snapshot(candidate, cand_out)
        mismatch = torch.zeros(num_envs, dtype=torch.bool)
        for name, value in ref_exact.items():
            mismatch |= (value.cpu() != cand_exact[name].cpu()).reshape(num_envs, -1).any(dim=1)
        new = mismatch & ~diverged
        if bool(new.any()):
            if parity.first_divergence_step is None:
                parity.first_divergence_step = step
            parity.diverged_envs += int(new.sum())
            if threshold_margin is not None:
                margin = threshold_margin(reference, ref_out).cpu()
                parity.rounding_flips += int((new & (margin <= atol)).sum())
        diverged |= mismatch
        keep = ~diverged
        for name, value in ref_floats.items():
            diff = (value.cpu().double() - cand_floats[name].cpu().double()).abs()[keep]
            diff = torch.nan_to_num(diff, nan=float("inf"))
            worst = float(diff.max()) if diff.numel() else 0.0
            parity.max_abs_diff[name] = max(parity.max_abs_diff.get(name, 0.0), worst)
    return parity


class _Recorded:
    """An env wrapper that keeps the outputs of ``reset`` so the comparison can start from them."""

    def __init__(self, env) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.device = env.device
        self.last_reset = None

    def reset(self, **kwargs):
        self.last_reset = self.env.reset(**kwargs)
        return self.last_reset

    def step(self, actions):
        return self.env.step(actions)


# --------------------------------------------------------------------------------------- CartPole
def _cartpole_snapshot(env, result) -> tuple[dict, dict]:
    inner = env.env._tensors  # elapsed / needs_reset are not part of the public API
    floats = {"obs": result[0], "state": env.env.state}
    if len(result) == 5:
        _, rewards, terminated, truncated, info = result
        exact = {"terminated": terminated, "truncated": truncated, "rewards": rewards,
                 "elapsed": inner.elapsed, "needs_reset": inner.needs_reset}
        if "final_obs" in info:
            exact["has_final_obs"] = info["_final_obs"]
            floats["final_obs"] = info["final_obs"]
    else:
        exact = {"elapsed": inner.elapsed, "needs_reset": inner.needs_reset}
    return exact, floats


def _cartpole_margin(env, result):
    """Distance of each env's last observation (final_obs where an episode ended) to a threshold."""
    import math

    obs = result[0]
    if len(result) == 5 and "final_obs" in result[4]:
        obs = result[4]["final_obs"].where(result[4]["_final_obs"][:, None], obs)
    obs = obs.double()
    x_margin = (obs[:, 0].abs() - 2.4).abs()
    theta_margin = (obs[:, 2].abs() - 12 * 2 * math.pi / 360).abs()
    return x_margin.minimum(theta_margin)


def cartpole_parity(device: str, *, reference_device: str = "cpu", dtype: str = "float32",
                    autoreset_mode: str = "next_step", num_envs: int = 4096, steps: int = 2000,
                    max_episode_steps: int = 50, seed: int = 0) -> Row:
    """CartPole on ``device`` against ``reference_device``: same seeds, same random actions."""
    import torch

    from gpu_envs.cartpole import CartPoleVectorEnv

    def make(dev):
        env = _Recorded(CartPoleVectorEnv(num_envs, device=dev, dtype=dtype, autoreset_mode=autoreset_mode,
                                          max_episode_steps=max_episode_steps))
        env.reset(seed=seed)
        return env

    reference, candidate = make(reference_device), make(device)
    generator = torch.Generator().manual_seed(seed)
    atol = CARTPOLE_ATOL[dtype]
    parity = compare_envs(reference, candidate, steps,
                          lambda _: torch.randint(0, 2, (num_envs,), generator=generator),
                          _cartpole_snapshot, _cartpole_margin, atol)
    setting = (f"{dtype}, {autoreset_mode}, {num_envs} envs x {steps} steps, "
               f"max_episode_steps={max_episode_steps}, {reference_device} vs {device}")
    return Row("cartpole parity", setting, parity.summary(atol), parity.status(atol),
               {"game": "cartpole", "kind": "parity", "dtype": dtype, "autoreset_mode": autoreset_mode,
                "atol": atol, **dataclasses.asdict(parity)})


def cartpole_throughput(device: str, log2_sizes: range, timing_options: dict,
                        dtype: str = "float32") -> list[Row]:
    """env-steps/s of ``CartPoleVectorEnv`` on ``device``, with and without action validation."""
    from gpu_envs.benchmarks.cartpole import gpu_envs_runner

    rows = []
    for log2 in log2_sizes:
        num_envs = 2**log2
        pool = max(2, min(64, 2**24 // num_envs))
        for validate in (True, False):
            runner = gpu_envs_runner(device, dtype, validate, pool)(num_envs, 0)
            rows.append(_throughput_row("cartpole throughput", f"2^{log2} envs, {dtype}, "
                                        f"validate_actions={validate}", runner, timing_options,
                                        {"game": "cartpole", "num_envs": num_envs, "dtype": dtype,
                                         "validate_actions": validate}))
    return rows


def _throughput_row(check: str, setting: str, runner, timing_options: dict, record: dict,
                    agents_per_env: int = 1) -> Row:
    from gpu_envs.benchmarks import timing

    try:
        result = timing.measure(runner.call, runner.num_envs, runner.sync, **timing_options)
    finally:
        runner.close()
    text = f"{timing.format_rate(result.env_steps_per_s)} env-steps/s"
    if agents_per_env > 1:
        text += f" ({timing.format_rate(result.env_steps_per_s * agents_per_env)} agent-steps/s)"
    text += f"; first call {result.first_call_s:.2f} s"
    return Row(check, setting, text, "", {"kind": "throughput", **record, **result.to_dict()})


# --------------------------------------------------------------------------------------- Tag
def tag_config() -> dict:
    """The seed run config's env parameters (5 taggers, 100 runners, k = 10)."""
    from gpu_envs.trainers.presets import preset

    return preset("tag")["env"]


def _tag_actions(env, generator, leading: tuple[int, ...] = ()):
    import torch

    shape = (*leading, env.num_envs, env.num_agents)
    acc = torch.randint(0, env.action_nvec[0], shape, generator=generator)
    turn = torch.randint(0, env.action_nvec[1], shape, generator=generator)
    return torch.stack((acc, turn), dim=-1)


def _tag_snapshot(env, result) -> tuple[dict, dict]:
    obs = result[0]
    info = result[-1]
    exact = {"active": info["active"], "t": env.env.state["t"]}
    floats = {"obs": obs, "x": env.env.state["x"], "y": env.env.state["y"]}
    if len(result) == 5:
        exact.update(terminated=result[2], truncated=result[3])
        floats["rewards"] = result[1]
    return exact, floats


def tag_parity(device: str, *, reference_device: str = "cpu", num_envs: int = 64, steps: int = 400,
               seed: int = 0) -> Row:
    """Tag (seed config) on ``device`` against ``reference_device``: same seeds and actions."""
    import torch

    from gpu_envs.tag import TagEnv

    config = tag_config()

    def make(dev):
        env = _Recorded(TagEnv(num_envs, dev, **config))
        env.reset(seed=seed)
        return env

    reference, candidate = make(reference_device), make(device)
    generator = torch.Generator().manual_seed(seed)
    parity = compare_envs(reference, candidate, steps, lambda _: _tag_actions(reference.env, generator),
                          _tag_snapshot)
    setting = f"seed config, {num_envs} envs x {steps} steps, {reference_device} vs {device}"
    return Row("tag parity", setting, parity.summary(TAG_ATOL), parity.status(TAG_ATOL),
               {"game": "tag", "kind": "parity", "atol": TAG_ATOL, **dataclasses.asdict(parity)})


def tag_throughput(device: str, log2_sizes: range, timing_options: dict) -> list[Row]:
    """env-steps/s (and agent-steps/s) of ``TagEnv`` with the seed config on ``device``."""
    import torch

    from gpu_envs.benchmarks.cartpole import Runner
    from gpu_envs.benchmarks.timing import cycle_pool
    from gpu_envs.tag import TagEnv

    config = tag_config()
    rows = []
    for log2 in log2_sizes:
        num_envs = 2**log2
        env = TagEnv(num_envs, device, **config)
        env.reset(seed=0)
        generator = torch.Generator().manual_seed(0)
        pool = _tag_actions(env, generator, (8,)).to(env.device)
        next_actions = cycle_pool(pool)
        sync = torch.cuda.synchronize if env.device.type == "cuda" else None
        runner = Runner(lambda: env.step(next_actions()), num_envs, sync, env.close)
        rows.append(_throughput_row("tag throughput", f"2^{log2} envs, seed config ({env.num_agents} agents)",
                                    runner, timing_options,
                                    {"game": "tag", "num_envs": num_envs, "agents_per_env": env.num_agents},
                                    env.num_agents))
    return rows


def tag_available() -> bool:
    """True when the Tag env is part of this installation."""
    try:
        import gpu_envs.tag  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------------------- command
def _log2_range(text: str) -> range:
    try:
        low, high = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW:HIGH (powers of two), got {text!r}") from None
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected 0 <= LOW <= HIGH, got {text!r}")
    return range(low, high + 1)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "device-check", help="CPU-vs-CUDA parity and CUDA throughput (needs a GPU)",
        description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="CUDA device to check (cuda)")
    parser.add_argument("--parity-envs", type=int, default=4096, help="CartPole parity envs (4096)")
    parser.add_argument("--parity-steps", type=int, default=2000, help="CartPole parity steps (2000)")
    parser.add_argument("--max-episode-steps", type=int, default=50,
                        help="CartPole truncation in the parity run, short to exercise it (50)")
    parser.add_argument("--cartpole-log2", type=_log2_range, default=range(10, 23), metavar="LOW:HIGH",
                        help="CartPole throughput sizes 2^LOW..2^HIGH (10:22)")
    parser.add_argument("--tag-parity-envs", type=int, default=64, help="Tag parity games (64)")
    parser.add_argument("--tag-parity-steps", type=int, default=400, help="Tag parity steps (400)")
    parser.add_argument("--tag-log2", type=_log2_range, default=range(6, 13), metavar="LOW:HIGH",
                        help="Tag throughput sizes 2^LOW..2^HIGH (6:12)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per size (3)")
    parser.add_argument("--target-seconds", type=float, default=0.3, help="length of one repeat (0.3)")
    parser.add_argument("--warmup-seconds", type=float, default=0.3, help="minimum warm-up (0.3)")
    parser.add_argument("--skip-throughput", action="store_true", help="parity checks only")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                        help="write the rows as JSON to PATH ('-' or no value: stdout, table to stderr)")
    parser.set_defaults(func=run)


def plan(args) -> list[Callable[[], list[Row]]]:
    """The checks to run, in order: CartPole parity and throughput, then Tag's when available."""
    timing_options = dict(repeats=args.repeats, target_seconds=args.target_seconds,
                          warmup_seconds=args.warmup_seconds)
    steps: list[Callable[[], list[Row]]] = []
    for dtype in ("float64", "float32"):
        for mode in ("next_step", "same_step"):
            steps.append(lambda dtype=dtype, mode=mode: [cartpole_parity(
                args.device, dtype=dtype, autoreset_mode=mode, num_envs=args.parity_envs,
                steps=args.parity_steps, max_episode_steps=args.max_episode_steps)])
    if not args.skip_throughput:
        steps.append(lambda: cartpole_throughput(args.device, args.cartpole_log2, timing_options))
    if tag_available():
        steps.append(lambda: [tag_parity(args.device, num_envs=args.tag_parity_envs,
                                         steps=args.tag_parity_steps)])
        if not args.skip_throughput:
            steps.append(lambda: tag_throughput(args.device, args.tag_log2, timing_options))
    return steps


def format_table(rows: list[Row]) -> str:
    """All rows as one Markdown table."""
    from gpu_envs.benchmarks.timing import markdown_table

    return markdown_table(["check", "setting", "result", "status"],
                          [[r.check, r.setting, r.result, r.status] for r in rows])


def exit_status(rows: list[Row]) -> int:
    """1 when a check failed, else 0."""
    return FAIL_EXIT if any(r.status == "FAIL" for r in rows) else 0


def run(args) -> int:
    """Entry point of ``gpu-envs device-check``."""
    from gpu_envs.devices import cuda_available

    if not cuda_available():
        print("gpu-envs device-check: no usable CUDA GPU here (it needs torch.cuda.is_available() and "
              "numba-cuda to find a driver); run it on a machine with an NVIDIA GPU. The CPU paths are "
              "covered by the test suite and `gpu-envs bench`.", file=sys.stderr)
        return NO_GPU_EXIT
    import torch

    out = sys.stderr if args.json == "-" else sys.stdout
    print(f"device-check on {torch.cuda.get_device_name(args.device)}"
          f"{'' if tag_available() else ' (gpu_envs.tag not importable: Tag rows skipped)'}",
          file=out, flush=True)
    rows: list[Row] = []
    for check in plan(args):
        for row in check():
            rows.append(row)
            print(f"  {row.check}: {row.setting}: {row.result} {row.status}", file=sys.stderr, flush=True)
    print(format_table(rows), file=out, flush=True)
    if args.json is not None:
        text = json.dumps([dataclasses.asdict(r) for r in rows], indent=1, default=str)
        if args.json == "-":
            print(text, flush=True)
        else:
            with open(args.json, "w") as handle:
                handle.write(text + "\n")
    return exit_status(rows)
