"""Replay the training figures the docs state: each preset and seed in a fresh process.

A documented figure is a preset, a seed (and any overrides) and what the run ended with: the
iteration of its best greedy evaluation and that evaluation's mean return (both read from
``ckpt/ckpt_best.pth.tar``). ``FIGURES`` holds every one the docs state that replays in about 10
minutes or less on a 2-core CPU; a longer run (Tag self-play's 400 iterations) is represented by a
documented shorter one. ``unstated`` checks that each figure's page states it and what it was
measured with, so that the table and the pages cannot drift apart.
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

Exit status 1 when a figure measured on this CPU capability does not replay exactly (the return
to the 2 decimals the docs state).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_envs.benchmarks.machine import cpu_model

#: The torch pin of README.md's install command (a fresh venv installs this one).
TORCH_PIN = "torch==2.13.0"
#: The repository's root: the docs' paths (``TrainingFigure.doc``) are relative to it.
REPOSITORY = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class TrainingFigure:
    """One documented training run, what it ended with and what it was measured with."""

    doc: str
    game: str
    seed: int
    best_iteration: int
    best_return: float
    cpu_capability: str
    versions: str
    date: str
    torch_threads: int = 1
    overrides: tuple[str, ...] = ()
    #: ``/proc/cpuinfo``'s model name of the machine it was measured on (empty: not recorded)
    cpu_model: str = ""

    def command(self) -> list[str]:
        """The ``gpu-envs train`` arguments that replay it."""
        return ["train", self.game, f"trainer.seed={self.seed}", *self.overrides]

    def documented_command(self) -> str:
        """The command as its page writes it: ``gpu-envs train GAME`` and the overrides (the seed
        stated beside it)."""
        return " ".join(["gpu-envs", "train", self.game, *self.overrides])


def _measured_on_the_xeon(
    date: str, doc: str, game: str, best_iteration: int, best_return: float, *overrides: str
) -> TrainingFigure:
    """A seed-1 figure measured on ``date`` on the AVX-512 Xeon (2 cores, numba's default
    threads), with the preset's 1 torch thread."""
    return TrainingFigure(
        doc,
        game,
        seed=1,
        best_iteration=best_iteration,
        best_return=best_return,
        cpu_capability="AVX512",
        versions="torch 2.13.0+cpu, numba 0.68.1, numpy 2.4.6, Python 3.11",
        date=date,
        overrides=overrides,
        cpu_model="Intel(R) Xeon(R) Processor",
    )


#: Every training figure the docs state that a run of at most ~10 minutes replays, with what it
#: was measured with.
FIGURES = (
    _measured_on_the_xeon("2026-12-06", "docs/quickstart.md", "cartpole", 44, 497.49),
    _measured_on_the_xeon("2026-12-06", "docs/mountain-car.md", "mountaincar", 2960, -119.46),
    _measured_on_the_xeon(
        "2026-12-06", "docs/mountain-car.md", "mountaincar-continuous", 1180, 97.62
    ),
    _measured_on_the_xeon("2026-12-06", "docs/training-pendulum.md", "pendulum", 184, -248.05),
    _measured_on_the_xeon("2026-12-06", "docs/acrobot.md", "acrobot", 950, -113.37),
    _measured_on_the_xeon(
        "2026-12-03",  # the first 50 of the preset's 400 iterations (17-19 min)
        "docs/training-tag-selfplay.md",
        "tag-selfplay",
        50,
        429.30,
        "trainer.total_timesteps=96000",
        "evaluation.eval_freq=10",
        "evaluation.num_episodes=100",
        "evaluation.score_policy=tagger",
    ),
)


def unstated(figure: TrainingFigure, root: Path = REPOSITORY) -> list[str]:
    """What of ``figure`` its page (``root / figure.doc``) does not state, so that the page and
    ``FIGURES`` cannot drift apart: the return to 2 decimals, the iteration, the replay command,
    the CPU capability, the versions string verbatim, the date and the torch threads (line breaks,
    thousands separators and bold marks ignored)."""
    path = root / figure.doc
    if not path.is_file():
        return [f"{figure.doc} does not exist"]
    text = " ".join(path.read_text().split())
    plain = text.replace(",", "").replace("*", "")
    threads = f"{figure.torch_threads} torch thread"
    wanted = {
        f"return {figure.best_return:.2f}": f"{figure.best_return:.2f}" in plain,
        f"iteration {figure.best_iteration}": f"iteration {figure.best_iteration}" in plain,
        f"command {figure.documented_command()!r}": figure.documented_command() in text,
        f"CPU capability {figure.cpu_capability}": figure.cpu_capability in text.replace("-", ""),
        f"versions {figure.versions!r}": figure.versions in text,
        f"date {figure.date}": figure.date in text,
        f"{threads}(s)": threads in text,
    }
    return [
        f"{figure.doc} does not state the {what}" for what, stated in wanted.items() if not stated
    ]


def cpu_capability(python: str = sys.executable) -> str:
    """The instruction set torch's CPU kernels use in ``python``'s environment (e.g. ``AVX512``)."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def replay(figure: TrainingFigure, python: str = sys.executable) -> dict:
    """Train ``figure``'s preset in a fresh process; its best checkpoint's iteration and return,
    and the run's wall-clock seconds."""
    with tempfile.TemporaryDirectory(prefix="gpu-envs-figure-") as folder:
        command = [python, "-m", "gpu_envs.cli", *figure.command()]
        start = time.perf_counter()
        result = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}"
            )
        best = next(Path(folder).glob("experiments/*/*/ckpt/ckpt_best.pth.tar"), None)
        if best is None:
            raise RuntimeError(
                f"{' '.join(command)} wrote no ckpt/ckpt_best.pth.tar: a figure needs greedy "
                "evaluations (evaluation.eval_freq > 0 in the preset or in its overrides)"
            )
        read = (
            "import sys, torch; c = torch.load(sys.argv[1], weights_only=True); "
            "print(c['iteration'], c['best_eval'])"
        )
        out = subprocess.run(
            [python, "-c", read, str(best)], capture_output=True, text=True, check=True
        )
    iteration, best_return = out.stdout.split()
    return {
        "best_iteration": int(iteration),
        "best_return": float(best_return),
        "seconds": round(seconds, 1),
    }


def verdict(
    figure: TrainingFigure, measured: dict, capability: str, model: str | None = None
) -> str:
    """``same``, ``DIFFERENT`` (same CPU capability and, where both are known, CPU ``model``: a
    regression) or ``other CPU``; the return is compared to the 2 decimals the docs state."""
    same = (measured["best_iteration"], round(measured["best_return"], 2)) == (
        figure.best_iteration,
        figure.best_return,
    )
    if same:
        return "same"
    same_model = None in (model, figure.cpu_model or None) or model == figure.cpu_model
    return "DIFFERENT" if capability == figure.cpu_capability and same_model else "other CPU"


def fresh_venv(folder: Path) -> str:
    """Create ``folder`` as README.md's install does (torch pin first, then this package)."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, TORCH_PIN], check=True)
    subprocess.run([*pip, "-e", f"{REPOSITORY}[train]"], check=True)
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
    known = sorted({figure.game for figure in FIGURES})
    unknown = sorted(set(args.game or ()) - set(known))
    if unknown:
        parser.error(f"--game {', '.join(unknown)}: no documented figure; one of {known}")
    python = fresh_venv(args.fresh_venv) if args.fresh_venv else sys.executable
    capability = cpu_capability(python)
    env_threads = os.environ.get("OMP_NUM_THREADS", "unset")
    print(f"this machine: torch CPU capability {capability}, OMP_NUM_THREADS {env_threads}")
    rows, regressions = [], 0
    for figure in FIGURES:
        if args.game and figure.game not in args.game:
            continue
        measured = replay(figure, python)
        outcome = verdict(figure, measured, capability, cpu_model())
        regressions += outcome == "DIFFERENT"
        rows.append({**dataclasses.asdict(figure), "measured": measured, "verdict": outcome})
        print(
            f"{figure.doc}: gpu-envs {' '.join(figure.command())}: "
            f"best {measured['best_return']} at "
            f"iteration {measured['best_iteration']} (documented {figure.best_return} at "
            f"{figure.best_iteration} on {figure.cpu_capability}, {figure.date}), "
            f"{measured['seconds']:.0f} s: {outcome}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 1 if regressions else 0


if __name__ == "__main__":
    raise SystemExit(main())
