"""The GPU run's driver: each part of ``device-check --full`` in its own process, in a time budget.

``python -m gpu_envs.device_check.parts OUT [--small] [--budget S] [--slack S] [OPTIONS]`` prints
the versions of the packages the check imports and where they come from, then runs
``gpu-envs device-check --only PART --json OUT/device-check-PART.json [OPTIONS]`` for each part of
:data:`~gpu_envs.device_check.plan.PARTS` in a fresh process and process group: a kernel fault,
a hang or a broken CUDA context in one part cannot reach the next. A part gets twice its estimate
plus :data:`SLACK_S` (``--slack``), within what is left of the budget; past that it is stopped
(SIGTERM, then SIGKILL), and its JSON keeps the rows it had measured.
``OUT/device-check-parts.json`` holds the versions and each part's exit status, seconds and
limit. ``.ci/device-run`` calls it.

Exit status: 0 every part passed, 2 no usable CUDA GPU (every part said so), 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gpu_envs.device_check.plan import PARTS
from gpu_envs.device_check.runner import NO_GPU_EXIT

#: Seconds a part gets beyond twice its estimate (imports, the CUDA context, a slower card).
SLACK_S = 60.0
#: The default budget of all parts (seconds): the device tool's 10 minutes, less the install and
#: a margin.
BUDGET_S = 480.0
#: Seconds between SIGTERM and SIGKILL for a part past its limit.
GRACE_S = 10.0
#: The distributions whose versions the run records.
VERSIONS = (
    "gpu-envs", "torch", "numba", "numba-cuda", "cuda-core", "cuda-bindings", "cuda-pathfinder",
    "llvmlite", "numpy", "lightning", "gymnasium", "pettingzoo", "omegaconf", "tbb",
)  # fmt: skip


def versions() -> dict[str, str]:
    """Each of :data:`VERSIONS` as ``version (folder)``, or ``missing``; and the file that
    ``numba.cuda`` imports, numba-cuda's unless its redirect (a ``.pth`` file) did not run."""
    found = {"numba.cuda": _origin("numba.cuda")}
    for name in VERSIONS:
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "missing"
            continue
        folder = distribution.locate_file("")
        found[name] = f"{distribution.version} ({folder})"
    return found


def _origin(module: str) -> str:
    try:
        spec = importlib.util.find_spec(module)
    except ImportError as error:
        return f"missing ({error})"
    return "missing" if spec is None else str(spec.origin)


def estimates(small: bool) -> dict[str, float]:
    """Each part's estimated seconds (the plan of ``device-check --full``, one H200)."""
    from gpu_envs.cli import build_parser
    from gpu_envs.device_check.plan import full_plan

    args = build_parser().parse_args(["device-check", "--full", *(["--small"] if small else [])])
    args.only = []
    seconds = dict.fromkeys(PARTS, 0.0)
    for check in full_plan(args):
        seconds[check.part] += check.estimate_s or 0.0
    return seconds


def run_part(command: Sequence[str], limit_s: float) -> dict:
    """Run ``command`` in its own process group for at most ``limit_s``; its record."""
    start = time.perf_counter()
    process = subprocess.Popen(command, start_new_session=True)
    timed_out = False
    try:
        code = process.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGTERM)
        try:
            code = process.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
    seconds = time.perf_counter() - start
    return {
        "exit": code,
        "seconds": round(seconds, 1),
        "limit_s": round(limit_s, 1),
        "timed_out": timed_out,
    }


def part_command(part: str, out: Path, options: Sequence[str]) -> list[str]:
    """The command line of one part: ``gpu-envs device-check --only PART``, rows to ``out``."""
    json_path = out / f"device-check-{part}.json"
    command = [sys.executable, "-m", "gpu_envs.cli", "device-check", "--only", part]
    return [*command, "--json", str(json_path), *options]


def run_parts(
    commands: dict[str, list[str]],
    estimate_s: dict[str, float],
    budget_s: float,
    out: Path,
    slack_s: float = SLACK_S,
) -> int:
    """Run each part's command with its limit (twice its estimate plus ``slack_s``, within what is
    left of ``budget_s``); record them in ``out/device-check-parts.json``."""
    record: dict = {"versions": versions(), "budget_s": budget_s, "parts": {}}
    for name, version in record["versions"].items():
        print(f"{name:16} {version}", flush=True)
    deadline = time.perf_counter() + budget_s
    for part, command in commands.items():
        left = deadline - time.perf_counter()
        limit = min(2 * estimate_s.get(part, 0.0) + slack_s, left)
        if limit <= 0:
            record["parts"][part] = {"exit": None, "skipped": "the budget is spent"}
        else:
            print(f"== part {part}: at most {limit:.0f} s", flush=True)
            record["parts"][part] = result = run_part(command, limit)
            print(f"== part {part}: {json.dumps(result)}", flush=True)
        (out / "device-check-parts.json").write_text(json.dumps(record, indent=2) + "\n")
    codes = [result["exit"] for result in record["parts"].values()]
    if all(code == 0 for code in codes):
        return 0
    return NO_GPU_EXIT if all(code == NO_GPU_EXIT for code in codes) else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m gpu_envs.device_check.parts``."""
    parser = argparse.ArgumentParser(
        prog="python -m gpu_envs.device_check.parts", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("out", type=Path, help="the folder of the rows")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds ({BUDGET_S:.0f})")
    parser.add_argument(
        "--slack", type=float, default=SLACK_S, help=f"seconds a part gets beyond twice its "
        f"estimate ({SLACK_S:.0f}; more in the CUDA simulator, which is no GPU)",
    )  # fmt: skip
    parser.add_argument("--small", action="store_true", help="CI sizes (device-check --small)")
    args, options = parser.parse_known_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    options = [*(["--small"] if args.small else []), *options]
    commands = {part: part_command(part, args.out, options) for part in PARTS}
    return run_parts(commands, estimates(args.small), args.budget, args.out, args.slack)


if __name__ == "__main__":
    sys.exit(main())
