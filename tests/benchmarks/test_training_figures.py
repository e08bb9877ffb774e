"""The documented training figures replay in a fresh process (benchmarks.training_figures)."""

import dataclasses
from pathlib import Path

import pytest

from gpu_envs.benchmarks import training_figures
from gpu_envs.benchmarks.training_figures import FIGURES, TrainingFigure, verdict

FIGURE = TrainingFigure(
    doc="docs/x.md",
    game="cartpole",
    seed=1,
    best_iteration=10,
    best_return=500.0,
    cpu_capability="AVX512",
    versions="torch 2.13.0",
)


@pytest.mark.parametrize(
    ("measured", "capability", "expected"),
    [
        ({"best_iteration": 10, "best_return": 500.0}, "AVX512", "same"),
        ({"best_iteration": 10, "best_return": 500.0}, "AVX2", "same"),
        ({"best_iteration": 12, "best_return": 500.0}, "AVX512", "DIFFERENT"),
        ({"best_iteration": 10, "best_return": 499.5}, "AVX512", "DIFFERENT"),
        ({"best_iteration": 12, "best_return": 480.0}, "AVX2", "other CPU"),
    ],
)
def test_verdict_is_a_regression_only_on_the_recorded_cpu_capability(
    measured, capability, expected
):
    assert verdict(FIGURE, measured, capability) == expected


def test_every_figure_names_its_page_versions_and_cpu_and_the_page_states_it():
    for figure in FIGURES:
        page = Path(figure.doc).read_text()
        assert figure.versions and figure.cpu_capability and figure.torch_threads >= 1
        assert f"{figure.best_return:.2f}".rstrip("0").rstrip(".") in page.replace(",", ""), figure


@pytest.mark.slow
def test_cartpole_figure_replays_in_a_fresh_process():
    (figure,) = [f for f in FIGURES if f.game == "cartpole"]
    measured = training_figures.replay(figure)
    capability = training_figures.cpu_capability()
    assert verdict(figure, measured, capability) != "DIFFERENT", (
        measured,
        dataclasses.asdict(figure),
    )
