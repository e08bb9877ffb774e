"""Replay the training figures the docs state: each preset and seed in a fresh process.

A documented figure is a preset, a seed and what the run ended with: the iteration of its best
greedy evaluation and that evaluation's mean return (both read from ``ckpt/ckpt_best.pth.tar``).
A run is bit-reproducible on one machine, but not across CPUs: torch's CPU matrix products (MKL)
and vectorised kernels pick their code path by the CPU's instruction set, each path rounds
differently, and a difference in the last bit early in a run changes its whole trajectory. So each
figure records what it was measured with (``torch``'s CPU capability, the versions, the threads),
and a replay on another capability is reported as "other CPU", not as a failure.

Measured (MountainCar-v0, seed 1, greedy return at iteration 600, one machine, same code and
versions): -137.17 with torch's own choice (AVX-512), -138.97 under ``MKL_CBWR=AVX2`` and -167.70
under ``MKL_CBWR=COMPATIBLE``. That is why docs/mountain-car.md's first figure (measured on
2026-12-02 on another machine) did not reproduce on a fresh install here.

    python -m gpu_envs.benchmarks.training_figures                 # every figure, this venv
    python -m gpu_envs.benchmarks.training_figures --game cartpole  # one
    python -m gpu_envs.benchmarks.training_figures --fresh-venv /tmp/fig-venv  # install first

Exit status 1 when a figure measured on this CPU capability does not replay exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: The torch pin of README.md's install command (a fresh venv installs this one).
TORCH_PIN = "torch==2.13.0"


@dataclasses.dataclass(frozen=True)
class TrainingFigure:
    """One documented training run and what it ended with."""

    doc: str
    game: str
    seed: int
    best_iteration: int
    best_return: float
    cpu_capability: str
    versions: str
    torch_threads: int = 1
    overrides: tuple[str, ...] = ()

    def command(self) -> list[str]:
        """The ``gpu-envs train`` arguments that replay it."""
        return ["train", self.game, f"trainer.seed={self.seed}", *self.overrides]


#: Every training figure the docs state, with what it was measured with.
FIGURES = (
    TrainingFigure(
        doc="docs/mountain-car.md",
        game="mountaincar",
        seed=1,
        best_iteration=2860,
        best_return=-108.27,
        cpu_capability="AVX512",
        versions="torch 2.13.0+cpu, numba 0.68.1, numpy 2.4.6, Python 3.11",
    ),
    TrainingFigure(
        doc="docs/quickstart.md",
        game="cartpole",
        seed=1,
        best_iteration=44,
        best_return=490.91,
        cpu_capability="AVX512",
        versions="torch 2.13.0+cpu, numba 0.68.1, numpy 2.4.6, Python 3.11",
    ),
)


def cpu_capability(python: str = sys.executable) -> str:
    """The instruction set torch's CPU kernels use in ``python``'s environment (e.g. ``AVX512``)."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def replay(figure: TrainingFigure, python: str = sys.executable) -> dict:
    """Train ``figure``'s preset in a fresh process; its best checkpoint's iteration and return."""
    with tempfile.TemporaryDirectory(prefix="gpu-envs-figure-") as folder:
        command = [python, "-m", "gpu_envs.cli", *figure.command()]
        result = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}"
            )
        best = next(Path(folder).glob("experiments/*/*/ckpt/ckpt_best.pth.tar"))
        read = (
            "import sys, torch; c = torch.load(sys.argv[1], weights_only=True); "
            "print(c['iteration'], c['best_eval'])"
        )
        out = subprocess.run(
            [python, "-c", read, str(best)], capture_output=True, text=True, check=True
        )
    iteration, best_return = out.stdout.split()
    return {"best_iteration": int(iteration), "best_return": float(best_return)}


def verdict(figure: TrainingFigure, measured: dict, capability: str) -> str:
    """``same``, ``DIFFERENT`` (same CPU capability: a regression) or ``other CPU``."""
    same = (measured["best_iteration"], measured["best_return"]) == (
        figure.best_iteration,
        figure.best_return,
    )
    if same:
        return "same"
    return "DIFFERENT" if capability == figure.cpu_capability else "other CPU"


def fresh_venv(folder: Path) -> str:
    """Create ``folder`` as README.md's install does (torch pin first, then this package)."""
    repository = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, TORCH_PIN], check=True)
    subprocess.run([*pip, "-e", f"{repository}[train]"], check=True)
    return str(folder / "bin" / "python")


def main(argv: list[str] | None = None) -> int:
    """Replay the figures (the command line above); 1 if one differs on its own CPU capability."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--game", action="append", help="replay only this preset's figures (repeatable)"
    )
    parser.add_argument(
        "--fresh-venv", type=Path, help="create this venv as README.md does and replay in it"
    )
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    python = fresh_venv(args.fresh_venv) if args.fresh_venv else sys.executable
    capability = cpu_capability(python)
    env_threads = os.environ.get("OMP_NUM_THREADS", "unset")
    print(f"this machine: torch CPU capability {capability}, OMP_NUM_THREADS {env_threads}")
    rows, regressions = [], 0
    for figure in FIGURES:
        if args.game and figure.game not in args.game:
            continue
        measured = replay(figure, python)
        outcome = verdict(figure, measured, capability)
        regressions += outcome == "DIFFERENT"
        rows.append({**dataclasses.asdict(figure), "measured": measured, "verdict": outcome})
        print(
            f"{figure.doc}: gpu-envs {' '.join(figure.command())}: "
            f"best {measured['best_return']} at "
            f"iteration {measured['best_iteration']} (documented {figure.best_return} at "
            f"{figure.best_iteration} on {figure.cpu_capability}): {outcome}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 1 if regressions else 0


if __name__ == "__main__":
    raise SystemExit(main())
