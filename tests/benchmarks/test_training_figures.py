"""The documented training figures replay in a fresh process (benchmarks.training_figures)."""

import dataclasses

import pytest

from gpu_envs.benchmarks import training_figures
from gpu_envs.benchmarks.training_figures import FIGURES, TrainingFigure, unstated, verdict

FIGURE = TrainingFigure(
    doc="docs/x.md",
    game="cartpole",
    seed=1,
    best_iteration=10,
    best_return=500.0,
    cpu_capability="AVX512",
    versions="torch 2.13.0",
    date="2026-12-03",
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


def test_a_return_is_compared_to_the_two_decimals_the_docs_state():
    measured = {"best_iteration": 10, "best_return": 500.004}
    assert verdict(FIGURE, measured, "AVX512") == "same"
    assert verdict(FIGURE, {**measured, "best_return": 500.006}, "AVX512") == "DIFFERENT"


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.game}-{f.seed}")
def test_every_figure_is_stated_on_its_page_with_what_it_was_measured_with(figure):
    assert unstated(figure) == []


def test_a_page_that_drifted_from_its_figure_is_named(tmp_path):
    page = tmp_path / "docs" / "x.md"
    page.parent.mkdir()
    stated = (
        "`gpu-envs train cartpole` stops at iteration 10 with **500.00**, measured 2026-12-03 on "
        "an AVX-512 CPU (torch 2.13.0, 1 torch thread).\n"
    )
    page.write_text(stated)
    assert unstated(FIGURE, tmp_path) == []
    page.write_text(stated.replace("500.00", "499.50").replace("AVX-512", "AVX2"))
    assert unstated(FIGURE, tmp_path) == [
        "docs/x.md does not state the return 500.00",
        "docs/x.md does not state the CPU capability AVX512",
    ]
    moved = dataclasses.replace(FIGURE, doc="docs/gone.md")
    assert unstated(moved, tmp_path) == ["docs/gone.md does not exist"]


@pytest.mark.slow
def test_cartpole_figure_replays_in_a_fresh_process():
    (figure,) = [f for f in FIGURES if f.game == "cartpole"]
    measured = training_figures.replay(figure)
    capability = training_figures.cpu_capability()
    assert verdict(figure, measured, capability) != "DIFFERENT", (
        measured,
        dataclasses.asdict(figure),
    )


def test_an_unknown_game_is_refused_naming_the_known_ones(capsys):
    with pytest.raises(SystemExit) as stop:
        training_figures.main(["--game", "tag"])
    assert stop.value.code == 2
    assert "--game tag: no documented figure; one of ['acrobot'" in capsys.readouterr().err
