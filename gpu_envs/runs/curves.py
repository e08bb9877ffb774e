"""Learning curves from experiment folders: episode return against env steps and wall time.

The trainer logs ``charts/episodic_return`` (``charts/<tag>/episodic_return`` per policy with
several), ``eval/mean_return`` and ``charts/train_seconds`` to the folder's CSV
(``log/csv/version_<N>/metrics.csv``, a version per resume); a run with frozen opponents
(``opponents.share``) also logs each policy's games against them and its self-play games apart
(``charts/<tag>/episodic_return_vs_frozen``, ``..._selfplay``). ``read_curves(folder)`` reads them
back, a resumed run's later versions replacing what they re-logged.

``figure_panels`` chooses what answers "is it learning?": one panel per policy, its games against
frozen opponents and its self-play games as two lines (not their mix, which stays flat while one
rises and the other falls), the evaluation's line naming its opponent, and for Tag the score of
random play (``random_play``: the random-vs-random matchup of ``gpu-envs evaluate tag``, played
once and kept in the run folder's ``random_play.json``). ``plot_groups`` draws groups of runs
(several seeds: their mean with a band from the lowest to the highest run) as one PNG;
``write_run_curves(folder)`` writes a run's own ``curves.png``; ``gpu-envs plot`` calls
``plot_groups``.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TRAIN_RETURN = re.compile(r"^charts/(?:(.+)/)?episodic_return(?:_(vs_frozen|selfplay))?$")
EVAL_RETURN = re.compile(r"^eval/(?:(.+)/)?mean_return$")
CURVES_FILE = "curves.png"
RANDOM_PLAY_FILE = "random_play.json"
#: The episodes (seeds 0..99) of the random baseline: ``gpu-envs evaluate tag``'s defaults.
RANDOM_PLAY_EPISODES = 100


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


def _series_name(column: str) -> str | None:
    """``train``, ``vs_frozen``, ``selfplay`` or ``eval``, with ``/<tag>`` for a policy of
    several; None for a column that is no return."""
    train = TRAIN_RETURN.match(column)
    if train is not None:
        kind, tag = train.group(2) or "train", train.group(1)
    elif (evaluation := EVAL_RETURN.match(column)) is not None:
        kind, tag = "eval", evaluation.group(1)
    else:
        return None
    return kind if tag is None else f"{kind}/{tag}"


def read_curves(folder: str | Path) -> dict[str, Curve]:
    """The return series of a run folder by name (``train``, ``eval``, ``train/<tag>``,
    ``vs_frozen/<tag>``, ``selfplay/<tag>``, ...).

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
                name, value = _series_name(column or ""), _number(text)
                if name is not None and not math.isnan(value):
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


def _config(folder: Path) -> dict:
    """The run's resolved config (``total_config.yaml``), or {} when it has none readable."""
    from gpu_envs.runs.config import ConfigError, load_yaml

    path = folder / "total_config.yaml"
    try:
        return load_yaml(path) if path.is_file() else {}
    except ConfigError:
        return {}


def _game(config: dict) -> str | None:
    from gpu_envs.runs.config import ConfigError, game_of

    try:
        return game_of(str(config.get("name", "")))
    except ConfigError:
        return None


def random_play(folder: Path) -> dict | None:
    """A Tag run's random baseline: random taggers against random runners on its env, the games
    and action draws of ``gpu-envs evaluate tag --episodes 100 --seed 0``'s first matchup (so its
    ``tags_mean`` is that report's ``random taggers vs random runners`` row), with each team's mean
    return. Read from the folder's ``random_play.json``, else played once (seconds) and
    written there. None for another game."""
    config = _config(folder)
    if _game(config) != "tag":
        return None
    path = folder / RANDOM_PLAY_FILE
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError):
        pass
    try:
        result = play_random_tag(dict(config.get("env") or {}), RANDOM_PLAY_EPISODES, seed=0)
    except (ValueError, TypeError, RuntimeError, MemoryError) as error:
        print(f"curves.png: no random baseline ({type(error).__name__}: {error})")
        return None
    with contextlib.suppress(OSError):  # (a read-only folder: drawn all the same)
        path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf8")
    return result


def play_random_tag(env_params: dict, episodes: int, seed: int) -> dict:
    """``episodes`` Tag games (game ``i`` from seed ``seed + i``) of uniformly random actions,
    drawn as ``gpu_envs.trainers.matchups.TeamPolicy`` draws them: ``{"episodes", "seed",
    "tags_mean", "returns": {"tagger": team mean, "runner": team mean}}``."""
    import torch

    from gpu_envs.games.tag.env import TEAMS, TagEnv

    env = TagEnv(episodes, "cpu", autoreset_mode="disabled", validate_actions=False, **env_params)
    try:
        generator = torch.Generator().manual_seed(seed)
        env.reset(seed=seed)
        tags = torch.zeros(episodes, dtype=torch.float64)
        returns = {team: torch.zeros(episodes, dtype=torch.float64) for team in TEAMS}
        playing = torch.ones(episodes, dtype=torch.bool)
        actions = torch.empty((episodes, env.num_agents, len(env.action_nvec)), dtype=torch.int64)
        for _ in range(env.episode_length):
            for team in TEAMS:
                shape = env.team_view(actions, team).shape[:2]
                drawn = [torch.randint(n, shape, generator=generator) for n in env.action_nvec]
                env.team_view(actions, team).copy_(torch.stack(drawn, -1))
            _, rewards, terminated, truncated, _ = env.step(actions)
            tags += env.team_view(env.tag_count, "runner").sum(-1) * playing
            for team in TEAMS:
                returns[team] += env.team_view(rewards, team).sum(-1).double() * playing
            playing &= ~(terminated | truncated)
            if not bool(playing.any()):
                break
    finally:
        env.close()
    return {
        "episodes": episodes,
        "seed": seed,
        "tags_mean": float(tags.mean()),
        "returns": {team: float(value.mean()) for team, value in returns.items()},
    }


@dataclass
class Line:
    """A series of one group of runs (one ``Curve`` per run)."""

    label: str
    curves: list[Curve]
    dashed: bool = False


@dataclass
class Panel:
    """One row of the figure: a policy's returns (``policy`` None: a run of one policy), and the
    score of random play to read them against."""

    policy: str | None
    lines: list[Line] = field(default_factory=list)
    baselines: list[tuple[str, float]] = field(default_factory=list)


def _split(name: str) -> tuple[str, str | None]:
    kind, _, tag = name.partition("/")
    return kind, tag or None


def _describe(kind: str, tag: str | None, config: dict) -> str:
    """What a series of policy ``tag`` holds, naming its opponent."""
    policies = list(config.get("policy") or {})
    others = " and ".join(f"'{p}'" for p in policies if p != tag) or None
    opponents = config.get("opponents") or {}
    if kind == "eval":
        versus = f" vs greedy trained {others}" if tag and others else ""
        return f"eval: greedy{f' {tag!r}' if tag else ''}{versus}"
    if tag is None or others is None:
        return "train"
    if kind == "vs_frozen":
        frozen = (
            "initial weights: random play"
            if not opponents.get("pool_size")
            else "initial weights and snapshots"
        )
        return f"'{tag}' vs frozen {others} ({frozen})"
    if kind == "selfplay" or not opponents.get("share"):
        if not any((config["policy"][p] or {}).get("to_train", True) for p in policies if p != tag):
            return f"'{tag}' vs untrained {others} (to_train false)"
        return f"'{tag}' vs learning {others} (self-play)"
    return f"'{tag}' all games (self-play and vs frozen {others})"


def figure_panels(groups: dict[str, list[Path]]) -> list[Panel]:
    """What the figure draws, per policy: the series that show learning (``vs_frozen`` and
    ``selfplay`` in place of their mix ``train`` when the run logged them), the evaluation (its
    opponent named), and each group's random baseline (Tag)."""
    panels: dict[str | None, Panel] = {}
    for label, runs in groups.items():
        prefix = f"{label}: " if len(groups) > 1 else ""  # (one group: the figure's title)
        per_run = [read_curves(run) for run in runs]
        config = _config(runs[0])
        names = sorted(set().union(*per_run))
        split = {_split(n)[1] for n in names if _split(n)[0] in ("vs_frozen", "selfplay")}
        order = {"vs_frozen": 0, "selfplay": 1, "train": 2, "eval": 3}
        for name in sorted(names, key=lambda n: (str(_split(n)[1]), order[_split(n)[0]])):
            kind, tag = _split(name)
            if kind == "train" and tag in split:
                continue  # their mix: flat while one rises and the other falls
            series = [curves[name] for curves in per_run if name in curves]
            runs_note = f" ({len(series)} runs)" if len(series) > 1 else ""
            panel = panels.setdefault(tag, Panel(tag))
            text = f"{prefix}{_describe(kind, tag, config)}{runs_note}"
            panel.lines.append(Line(text, series, kind == "eval"))
        baseline = random_play(runs[0])
        if baseline is not None:
            for tag, panel in panels.items():
                if tag is not None and tag not in baseline["returns"]:
                    continue  # a policy that is not one team
                team = baseline["returns"]
                value = sum(team.values()) if tag is None else team[tag]
                panel.baselines.append(
                    (
                        f"{prefix}random play: {value:.1f} (random vs random, "
                        f"{baseline['tags_mean']:.1f} runners tagged per episode as in "
                        "gpu-envs evaluate tag)",
                        value,
                    )
                )
    return [panel for _, panel in sorted(panels.items(), key=lambda item: str(item[0]))]


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
    """One PNG of ``figure_panels``: a row per policy, its return curves (mean over a group's
    runs, band from min to max) against env steps (left) and training seconds (right);
    evaluations dashed, random play dotted."""
    panels = figure_panels(groups)
    if not any(panel.lines for panel in panels):
        raise ValueError(f"no return curves in {sorted(groups)} (no episode ended yet?)")
    from matplotlib.figure import Figure  # (not pyplot: no GUI backend, ~0.3 s less to import)

    figure = Figure(figsize=(15, 4 * len(panels)), layout="constrained")
    axes = figure.subplots(len(panels), 2, squeeze=False)
    for panel, row in zip(panels, axes):
        for line in panel.lines:
            color = None
            for axis, plot in zip(("steps", "seconds"), row):
                x, mean, low, high = _band(line.curves, axis)
                if not len(x):
                    continue
                style = ("--" if line.dashed else "-") + ("o" if len(x) < 30 else "")
                (drawn,) = plot.plot(x, mean, style, color=color, label=line.label, markersize=3)
                color = drawn.get_color()
                if len(line.curves) > 1:
                    plot.fill_between(x, low, high, color=color, alpha=0.2)
        for label, value in panel.baselines:
            for plot in row:
                plot.axhline(value, linestyle=":", color="grey", label=label)
        ylabel = "episode return" if panel.policy is None else f"'{panel.policy}' team return"
        for plot, xlabel in zip(row, ("env steps", "training time (s)")):
            plot.set_xlabel(xlabel)
            plot.set_ylabel(ylabel)
            plot.grid(alpha=0.3)
        row[1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    if title:
        figure.suptitle(title)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
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
