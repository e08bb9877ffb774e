"""Learning curves from experiment folders: episode return against env steps and wall time.

The trainer logs ``charts/episodic_return`` (``charts/<tag>/episodic_return`` per policy with
several), ``eval/mean_return`` and ``charts/train_seconds`` to the folder's CSV
(``log/csv/version_<N>/metrics.csv``, a version per resume). ``read_curves(folder)`` reads them
back, a resumed run's later versions replacing what they re-logged; ``plot_groups`` draws groups of
runs (several seeds: their mean with a band from the lowest to the highest run) as one PNG;
``write_run_curves(folder)`` writes a run's own ``curves.png``; ``gpu-envs plot`` calls
``plot_groups``.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TRAIN_RETURN = re.compile(r"^charts/(?:(.+)/)?episodic_return$")
EVAL_RETURN = re.compile(r"^eval/(?:(.+)/)?mean_return$")
CURVES_FILE = "curves.png"


@dataclass
class Curve:
    """One series of a run: env steps, training seconds and values, in step order."""

    steps: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def read_curves(folder: str | Path) -> dict[str, Curve]:
    """The return series of a run folder by name (``train``, ``eval``, or ``train/<tag>``...).

    Raises ``FileNotFoundError`` when the folder holds no trainer CSV log.
    """
    folder = Path(folder)
    versions = sorted(
        (folder / "log" / "csv").glob("version_*/metrics.csv"),
        key=lambda p: int(p.parent.name.split("_")[1]),
    )
    if not versions:
        raise FileNotFoundError(f"{folder}: no trainer log (log/csv/version_*/metrics.csv)")
    points: dict[str, dict[float, tuple[float, float]]] = {}
    for path in versions:
        with open(path, newline="", encoding="utf8") as handle:
            rows = list(csv.DictReader(handle))
        first = min((_number(r.get("step")) for r in rows), default=math.inf)
        for series in points.values():  # a resume logs again from its checkpoint's step
            for step in [s for s in series if s >= first]:
                del series[step]
        for row in rows:
            step, seconds = _number(row.get("step")), _number(row.get("charts/train_seconds"))
            for column, text in row.items():
                match = TRAIN_RETURN.match(column or "") or EVAL_RETURN.match(column or "")
                value = _number(text)
                if match is None or math.isnan(value):
                    continue
                kind = "train" if column.startswith("charts/") else "eval"
                name = kind if match.group(1) is None else f"{kind}/{match.group(1)}"
                points.setdefault(name, {})[step] = (seconds, value)
    curves = {}
    for name, series in sorted(points.items()):
        curve = Curve()
        for step in sorted(series):
            curve.steps.append(step)
            curve.seconds.append(series[step][0])
            curve.values.append(series[step][1])
        curves[name] = curve
    return curves


def run_folders(path: str | Path) -> list[Path]:
    """``path`` itself when it is a run folder, else the run folders right under it (seeds)."""
    path = Path(path)
    if (path / "log" / "csv").is_dir():
        return [path]
    runs = (
        sorted(p for p in path.iterdir() if (p / "log" / "csv").is_dir()) if path.is_dir() else []
    )
    if not runs:
        raise FileNotFoundError(f"{path}: not a run folder and holds none (no log/csv inside)")
    return runs


def _band(curves: list[Curve], axis: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, mean, low, high) of ``curves`` on a common grid of ``axis`` ("steps" or "seconds")."""
    xs = [np.asarray(getattr(c, axis), dtype=float) for c in curves]
    ys = [np.asarray(c.values, dtype=float) for c in curves]
    kept = [(x, y) for x, y in zip(xs, ys) if len(x) and not np.isnan(x).all()]
    if len(kept) == 1:
        x, y = kept[0]
        return x, y, y, y
    end = min(x[-1] for x, _ in kept)  # where every run has data
    grid = np.linspace(max(x[0] for x, _ in kept), end, 200)
    table = np.stack([np.interp(grid, x, y) for x, y in kept])
    return grid, table.mean(0), table.min(0), table.max(0)


def plot_groups(groups: dict[str, list[Path]], out: str | Path, title: str = "") -> Path:
    """One PNG: each group's return curves (mean over its runs, band from min to max) against
    env steps (left) and training seconds (right); evaluations dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    drawn = 0
    for label, runs in groups.items():
        per_run = [read_curves(run) for run in runs]
        for name in sorted(set().union(*per_run)):
            series = [curves[name] for curves in per_run if name in curves]
            line_label = f"{label} {name}" + (f" ({len(series)} runs)" if len(series) > 1 else "")
            style = "--" if name.startswith("eval") else "-"
            color = None
            for axis, panel in zip(("steps", "seconds"), axes):
                x, mean, low, high = _band(series, axis)
                if not len(x):
                    continue
                (line,) = panel.plot(x, mean, style, color=color, label=line_label)
                color = line.get_color()
                if len(series) > 1:
                    panel.fill_between(x, low, high, color=color, alpha=0.2)
            drawn += 1
    if not drawn:
        plt.close(figure)
        raise ValueError(f"no return curves in {sorted(groups)} (no episode ended yet?)")
    for panel, xlabel in zip(axes, ("env steps", "training time (s)")):
        panel.set_xlabel(xlabel)
        panel.set_ylabel("episode return")
        panel.grid(alpha=0.3)
    axes[0].legend(fontsize="small")
    if title:
        figure.suptitle(title)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def write_run_curves(folder: Path) -> Path | None:
    """``<folder>/curves.png`` of a run; None (with a note) when it cannot be drawn."""
    try:
        return plot_groups({folder.parent.name: [folder]}, folder / CURVES_FILE, str(folder))
    except ImportError:
        print("curves.png not written: matplotlib is not installed (pip install matplotlib)")
    except (FileNotFoundError, ValueError) as error:
        print(f"curves.png not written: {error}")
    return None


def groups_of(paths: Sequence[str | Path]) -> dict[str, list[Path]]:
    """``gpu-envs plot``'s arguments as groups: each path (a run, or a folder of runs) is one."""
    groups: dict[str, list[Path]] = {}
    for path in paths:
        label = Path(path).resolve().name
        while label in groups:
            label += "'"
        groups[label] = run_folders(path)
    return groups
