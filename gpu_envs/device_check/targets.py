"""The GPU targets of issue 36 and their judgement on ``device-check --full``'s rows.

Each target names the rows it applies to (by their record) and a bound on one figure of them. A
row measured on a real GPU is "met" or "not met"; one measured elsewhere (the CPU, the CUDA
simulator) is "not measured", as is a target that no row of the run applies to.

Per machine kind (:func:`machine_kind` of the device's name): issue 36's figures are an H200's
(4.8 TB/s of HBM3e). CartPole's lean step at 2^20 envs is bound by memory bandwidth, so its
targets scale with the kind's bandwidth (an H100 SXM's 3.35 TB/s: 0.70 of them); the host's work
per step does not depend on the GPU and keeps its bound. The plan's estimates
(:mod:`gpu_envs.device_check.plan`) hold for both kinds: their time is the host's (compiles,
the CPU reference of the parity checks, fixed-length timing rounds), the device's share under a
second at the lean rows' sizes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gpu_envs.benchmarks import report
from gpu_envs.device_check.rows import Row

MET, NOT_MET, NOT_MEASURED = "met", "not met", "not measured"


@dataclasses.dataclass(frozen=True)
class Target:
    """``field`` of the rows that ``applies`` to (their record) is at least (``at_least``) or at
    most ``bound``."""

    name: str
    field: str
    bound: float
    at_least: bool
    unit: str
    applies: Callable[[dict], bool]

    @property
    def text(self) -> str:
        value = report.format_rate(self.bound) if self.bound >= 1e3 else f"{self.bound:g}"
        return f"{'>=' if self.at_least else '<='} {value} {self.unit}"

    def judge(self, record: dict, on_gpu: bool) -> str:
        """MET, NOT_MET, or NOT_MEASURED (not on a GPU, or the row lacks the figure)."""
        value = record.get(self.field)
        if not on_gpu or value is None:
            return NOT_MEASURED
        return MET if (value >= self.bound if self.at_least else value <= self.bound) else NOT_MET


def _cartpole_at_2_20(dtype: str) -> Callable[[dict], bool]:
    return lambda r: (
        r.get("game") == "cartpole" and r.get("num_envs") == 2**20 and r.get("dtype") == dtype
    )


def _lean(launch: str) -> Callable[[dict], bool]:
    return lambda r: r.get("launch") == launch and "host_us_per_step" in r


@dataclasses.dataclass(frozen=True)
class MachineKind:
    """A GPU the targets are sized for: its name and HBM bandwidth (TB/s)."""

    name: str
    hbm_tb_s: float


H200 = MachineKind("H200", 4.8)
#: The H100's variants by the words of their device names (SXM: HBM3; PCIe: HBM2e).
H100 = MachineKind("H100", 3.35)
H100_NVL = MachineKind("H100 NVL", 3.9)
H100_PCIE = MachineKind("H100 PCIe", 2.0)
#: The kind issue 36's figures are for.
REFERENCE = H200


def machine_kind(device_name: str) -> MachineKind:
    """The kind of the GPU named ``device_name`` (``torch.cuda.get_device_name``, e.g. "NVIDIA
    H100 80GB HBM3"): an H100 (SXM, NVL or PCIe) or an H200; :data:`REFERENCE` for any other
    name (the targets as issue 36 states them)."""
    words = device_name.upper()
    if "H100" in words:
        return H100_NVL if "NVL" in words else H100_PCIE if "PCIE" in words else H100
    if "H200" in words:
        return H200
    return dataclasses.replace(REFERENCE, name=f"{device_name} (judged by H200 figures)")


def _cartpole_target(dtype: str, h200_bound: float, kind: MachineKind) -> Target:
    return Target(
        f"CartPole {dtype}, 2^20 envs",
        "env_steps_per_s",
        h200_bound * kind.hbm_tb_s / REFERENCE.hbm_tb_s,
        True,
        "env-steps/s",
        _cartpole_at_2_20(dtype),
    )


def gpu_targets(kind: MachineKind = REFERENCE) -> tuple[Target, ...]:
    """Issue 36's GPU targets on ``kind``: CartPole's lean step at 2^20 envs (half the H200's HBM
    roof in float64; scaled by ``kind``'s bandwidth), and the host's work per step of every lean
    row (the same on every kind)."""
    return (
        _cartpole_target("float64", 20e9, kind),
        _cartpole_target("float32", 30e9, kind),
        *HOST_TARGETS,
    )


HOST_TARGETS = (
    Target(
        "host work per plain step",
        "host_us_per_step",
        10.0,
        False,
        "us",
        _lean("plain launches"),
    ),
    Target(
        "host work per graph-replayed step",
        "host_us_per_step",
        2.0,
        False,
        "us",
        _lean("graph replay"),
    ),
)
#: The targets of :data:`REFERENCE` (an H200).
GPU_TARGETS = gpu_targets()


def mark(row: Row, on_gpu: bool, targets: tuple[Target, ...] = GPU_TARGETS) -> Row:
    """Add to ``row.targets`` each target that applies to it, with its verdict (in place)."""
    row.targets += [
        {"target": t.name, "bound": t.text, "status": t.judge(row.record, on_gpu)}
        for t in targets
        if t.applies(row.record)
    ]
    return row


def summary(rows: list[Row], on_gpu: bool, targets: tuple[Target, ...] = GPU_TARGETS) -> list[dict]:
    """Each target with the rows it applies to and their verdicts: "met" when every one of them
    met it, "not met" when one did not, "not measured" when none was measured on a GPU."""
    out = []
    for target in targets:
        judged = [
            (f"{r.check}: {r.setting}", target.judge(r.record, on_gpu))
            for r in rows
            if target.applies(r.record)
        ]
        verdicts = {verdict for _, verdict in judged}
        if not verdicts or verdicts == {NOT_MEASURED}:
            status = NOT_MEASURED
        else:
            status = NOT_MET if NOT_MET in verdicts else MET
        out.append(
            {
                "target": target.name,
                "bound": target.text,
                "status": status,
                "rows": [{"row": name, "status": verdict} for name, verdict in judged],
            }
        )
    return out
