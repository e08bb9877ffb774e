"""The device check's run: its plan printed, each check run and journaled, the targets judged.

``gpu-envs device-check`` (:mod:`gpu_envs.commands.device_check`) parses the arguments and calls
:func:`run`.
"""

from __future__ import annotations

import sys
import time
import traceback

from gpu_envs.benchmarks import report
from gpu_envs.device_check.journal import (
    Journal,
    exit_status,
    format_table,
    format_targets,
)
from gpu_envs.device_check.plan import (
    PARTS,
    Check,
    format_plan,
    full_plan,
    plan,
    total_estimate,
)
from gpu_envs.device_check.rows import Row
from gpu_envs.device_check.targets import REFERENCE, gpu_targets, machine_kind, mark, summary

#: Exit status of a run that found no usable CUDA GPU.
NO_GPU_EXIT = 2


def _device_name(args) -> tuple[str, bool] | None:
    """The checked device in words, and whether it is a real GPU; None when there is none."""
    from gpu_envs.engine.devices import cuda_available, simulated_cuda

    if args.device == "cpu":
        return "the CPU (reference: the CPU)", False
    if simulated_cuda():
        return "numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)", False
    if cuda_available():
        import torch

        return torch.cuda.get_device_name(args.device), True
    return None


def _run_check(check: Check) -> tuple[list[Row], float]:
    """``check``'s rows and its seconds; one FAIL row naming the error when it raises."""
    start = time.perf_counter()
    try:
        rows = check.run()
    except Exception as error:  # (one broken check does not lose the others)
        traceback.print_exc()
        message = f"{type(error).__name__}: {error}"
        first_line = message.splitlines()[0]  # (a table cell; the record keeps it all)
        rows = [Row(check.what, "", f"error: {first_line}", "FAIL", {"error": message})]
    return rows, time.perf_counter() - start


def run(args) -> int:
    """Entry point of ``gpu-envs device-check``."""
    args.full = args.full or bool(args.only)
    args.only = sorted({part for parts in args.only or () for part in parts}, key=PARTS.index)
    device = _device_name(args)
    if device is None:
        print(
            "gpu-envs device-check: no usable CUDA GPU here (it needs torch.cuda.is_available() "
            "and numba-cuda to find a driver); run it on a machine with an NVIDIA GPU. The CPU "
            "paths are covered by the test suite and `gpu-envs bench`.",
            file=sys.stderr,
        )
        return NO_GPU_EXIT
    name, on_gpu = device
    kind = machine_kind(name) if on_gpu else REFERENCE  # targets scaled to the GPU's bandwidth
    kind_targets = gpu_targets(kind)
    out = sys.stderr if args.json == "-" else sys.stdout
    checks = full_plan(args) if args.full else plan(args)
    print(f"device-check on {name}", file=out, flush=True)
    if args.full:
        title = f"plan (estimated seconds on one {kind.name}; basis: gpu_envs.device_check.plan)"
        print(format_plan(checks, title), file=out, flush=True)
    header = {
        "command": "device-check",
        "device": name,
        "machine_kind": kind.name,
        "settings": report.settings(args),
        "estimate_s": total_estimate(checks) if args.full else None,
        "plan": [{"part": c.part, "what": c.what, "estimate_s": c.estimate_s} for c in checks],
    }
    journal = Journal(args.json, header)
    for check in checks:
        rows, seconds = _run_check(check)
        if args.full:
            rows = [mark(row, on_gpu, kind_targets) for row in rows]
        check_record = {"part": check.part, "what": check.what, "estimate_s": check.estimate_s}
        journal.add(rows, {**check_record, "seconds": seconds})
    targets = summary(journal.rows, on_gpu, kind_targets) if args.full else []
    journal.finish(targets)
    print(format_table(journal.rows), file=out, flush=True)
    if targets:
        print(format_targets(targets), file=out, flush=True)
    return exit_status(journal.rows)
