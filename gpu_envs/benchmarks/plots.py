"""PNG charts of ``gpu-envs bench cartpole|tag --json`` results.

    gpu-envs bench cartpole --json cartpole.json
    python -m gpu_envs.benchmarks.plots cartpole.json docs/_static/bench-cartpole.png

Input: the JSON document the bench commands write (an object whose ``"records"`` list holds one
record per implementation and batch size) or a bare list of such records. A record is plotted when
it has a number for the metric (``env_steps_per_s`` by default, or ``agent_steps_per_s`` for Tag)
and for ``num_envs``; skipped, failed (``"error"``) and first-step records are left out. Records are
grouped by ``impl`` and labelled with ``label``.

Output: with two batch sizes or more, a log-log line chart of the metric against ``num_envs``, one
line per implementation, with the range of the timed repeats as error bars when the records give it
(``<metric>_min`` / ``<metric>_max``); with a single batch size, a horizontal bar chart. Our
implementations (``impl`` starting with ``gpu_envs`` or ``ours``) are drawn solid, the peers dashed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from gpu_envs.benchmarks.report import format_rate

METRICS = {"env_steps_per_s": "env-steps/s", "agent_steps_per_s": "agent-steps/s"}
OUR_PREFIXES = ("gpu_envs", "ours")


@dataclass
class Series:
    """One implementation's points, in increasing ``num_envs``."""

    impl: str
    label: str
    num_envs: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    lows: list[float] = field(default_factory=list)
    highs: list[float] = field(default_factory=list)

    @property
    def ours(self) -> bool:
        return self.impl.startswith(OUR_PREFIXES)


def _number(value: Any) -> TypeGuard[float]:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def records_of(document: Any) -> list[dict[str, Any]]:
    """The record list of a bench JSON document (or the document itself when it is a list)."""
    records = document.get("records") if isinstance(document, dict) else document
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(
            "expected the JSON of `gpu-envs bench ... --json`: an object with a 'records' "
            "list of objects, or a list of record objects"
        )
    return records


def collect_series(records: list[dict[str, Any]], metric: str = "env_steps_per_s") -> list[Series]:
    """Plottable records grouped by ``impl`` (first-seen order), each sorted by ``num_envs``.

    Raises:
        ValueError: ``metric`` is unknown, no record can be plotted, or an implementation has two
            records for the same ``num_envs``.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {', '.join(METRICS)}")
    by_impl: dict[str, Series] = {}
    for record in records:
        if record.get("kind", "throughput") != "throughput" or "error" in record:
            continue
        value, num_envs = record.get(metric), record.get("num_envs")
        if not _number(value) or not isinstance(num_envs, int) or num_envs < 1:
            continue
        impl = str(record.get("impl", record.get("label", "?")))
        series = by_impl.setdefault(impl, Series(impl, str(record.get("label", impl))))
        if num_envs in series.num_envs:
            raise ValueError(f"implementation {impl!r} has two records for num_envs={num_envs}")
        low, high = record.get(f"{metric}_min"), record.get(f"{metric}_max")
        series.num_envs.append(num_envs)
        series.values.append(float(value))
        series.lows.append(float(low) if _number(low) else float(value))
        series.highs.append(float(high) if _number(high) else float(value))
    if not by_impl:
        raise ValueError(
            f"no record to plot: none has numbers for both {metric!r} and 'num_envs' "
            "(skipped, failed and first-step records are left out)"
        )
    for series in by_impl.values():
        order = sorted(range(len(series.num_envs)), key=series.num_envs.__getitem__)
        for name in ("num_envs", "values", "lows", "highs"):
            setattr(series, name, [getattr(series, name)[i] for i in order])
    return list(by_impl.values())


def plot(
    series: list[Series], out: str | Path, metric: str = "env_steps_per_s", title: str | None = None
) -> Path:
    """Draw ``series`` into the PNG file ``out`` (line chart, or bars for a single batch size)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ImportError(
            "gpu_envs.benchmarks.plots needs matplotlib: pip install matplotlib"
        ) from error

    sizes = sorted({n for s in series for n in s.num_envs})
    figure = Figure(figsize=(8.0, 4.8), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    unit = METRICS[metric]
    if len(sizes) == 1:
        labels = [s.label for s in series]
        values = [s.values[0] for s in series]
        colours = ["tab:blue" if s.ours else "tab:gray" for s in series]
        bars = axes.barh(labels, values, color=colours)
        axes.bar_label(bars, labels=[format_rate(v) for v in values], padding=3)
        axes.invert_yaxis()
        axes.set_xscale("log")
        axes.set_xlabel(f"{unit} (num_envs={sizes[0]}, log scale)")
    else:
        for s in series:
            errors = [
                [v - lo for v, lo in zip(s.values, s.lows)],
                [hi - v for v, hi in zip(s.values, s.highs)],
            ]
            axes.errorbar(
                s.num_envs,
                s.values,
                yerr=errors,
                marker="o",
                capsize=3,
                label=s.label,
                linestyle="-" if s.ours else "--",
                linewidth=2.0 if s.ours else 1.2,
            )
        axes.set_xscale("log", base=2)
        axes.set_xticks(sizes, [str(n) for n in sizes])
        axes.minorticks_off()
        axes.set_yscale("log")
        axes.set_xlabel("num_envs (log scale)")
        axes.set_ylabel(f"{unit} (log scale)")
        axes.legend(fontsize="small")
        axes.grid(True, which="major", alpha=0.3)
    axes.set_title(title or f"{unit} by implementation")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
    return out


@dataclass(frozen=True)
class DocsFigure:
    """A chart of the benchmark pages, drawn from committed JSON in ``docs/results/``."""

    png: str
    sources: tuple[str, ...]
    metric: str
    title: str


#: The charts the docs build draws (``docs/conf.py``) into ``docs/_plots/``.
DOCS_FIGURES = (
    DocsFigure(
        "bench-cartpole.png",
        ("cartpole-2026-12-02-bare-kernel.json",),
        "env_steps_per_s",
        "CartPole-v1 on 2 CPU cores (2026-12-02)",
    ),
    DocsFigure(
        "bench-pendulum.png",
        ("pendulum-2026-12-01.json",),
        "env_steps_per_s",
        "Pendulum-v1 on 2 CPU cores (2026-12-01)",
    ),
    DocsFigure(
        "bench-tag.png",
        ("tag-2026-12-02-ours-1.json", "tag-2026-12-02-jaxmarl-1.jsonl"),
        "env_steps_per_s",
        "Tag, 5 taggers + 100 runners, on 2 CPU cores (2026-12-02)",
    ),
    DocsFigure(
        "bench-tag-peers.png",
        ("tag-2026-11-29.json",),
        "agent_steps_per_s",
        "Tag beside VMAS and MPE2 on 2 CPU cores (2026-11-29)",
    ),
)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a bench JSON document, or of a JSON-lines file (one record a line)."""
    text = path.read_text(encoding="utf8")
    if path.suffix == ".jsonl":
        return records_of([json.loads(line) for line in text.splitlines() if line.strip()])
    return records_of(json.loads(text))


def write_docs_figures(results: Path, out: Path) -> list[Path]:
    """Draw every chart of :data:`DOCS_FIGURES` from the JSON in ``results`` into ``out``."""
    return [
        plot(
            collect_series(
                [r for name in figure.sources for r in read_records(results / name)],
                figure.metric,
            ),
            out / figure.png,
            figure.metric,
            figure.title,
        )
        for figure in DOCS_FIGURES
    ]


def main(argv: list[str] | None = None) -> int:
    """Command line: plot the JSON record of a ``gpu-envs bench`` run."""
    parser = argparse.ArgumentParser(
        prog="python -m gpu_envs.benchmarks.plots", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "input", type=Path, help="JSON (or JSON lines) written by `gpu-envs bench ... --json`"
    )
    parser.add_argument("output", type=Path, help="PNG file to write")
    parser.add_argument(
        "--metric",
        default="env_steps_per_s",
        choices=tuple(METRICS),
        help="value to plot (default env_steps_per_s)",
    )
    parser.add_argument("--title", help="chart title")
    args = parser.parse_args(argv)
    try:
        series = collect_series(read_records(args.input), args.metric)
    except OSError as error:
        parser.error(f"cannot read {args.input}: {error.strerror}")
    except json.JSONDecodeError as error:
        parser.error(f"{args.input} is not JSON: {error}")
    except ValueError as error:
        parser.error(f"{args.input}: {error}")
    print(plot(series, args.output, args.metric, args.title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
