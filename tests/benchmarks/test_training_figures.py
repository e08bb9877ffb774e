"""The documented training figures replay in a fresh process (benchmarks.training_figures)."""

import dataclasses

import pytest

from gpu_envs.benchmarks import machine, training_figures
from gpu_envs.benchmarks.training_figures import FIGURES, TrainingFigure, unstated, verdict
from gpu_envs.games import GAMES

FIGURE = TrainingFigure(
    doc="docs/x.md",
    game="cartpole",
    seed=1,
    best_iteration=10,
    best_return=500.0,
    cpu_capability="AVX512",
    versions="torch 2.13.0",
    date="2026-12-03",
    cpu_model="Intel(R) Xeon(R) Processor",
)


@pytest.mark.parametrize(
    ("measured", "capability", "model", "expected"),
    [
        ({"best_iteration": 10, "best_return": 500.0}, "AVX512", None, "same"),
        ({"best_iteration": 10, "best_return": 500.0}, "AVX2", None, "same"),
        ({"best_iteration": 12, "best_return": 500.0}, "AVX512", None, "DIFFERENT"),
        ({"best_iteration": 10, "best_return": 499.5}, "AVX512", None, "DIFFERENT"),
        ({"best_iteration": 12, "best_return": 480.0}, "AVX2", None, "other CPU"),
        ({"best_iteration": 12, "best_return": 480.0}, "AVX512", FIGURE.cpu_model, "DIFFERENT"),
        # issue 43: an AMD EPYC reports AVX512 too and ends iteration 102 / 488.25, every time
        ({"best_iteration": 102, "best_return": 488.25}, "AVX512", "AMD EPYC", "other CPU"),
    ],
)
def test_verdict_is_a_regression_only_on_the_recorded_cpu_capability_and_model(
    measured, capability, model, expected
):
    assert verdict(FIGURE, measured, capability, model) == expected


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
    # What holds on any CPU: two fresh processes end the same run, and it learns to the target;
    # the docs' exact figure only on the CPU (model and torch capability) it was measured on.
    (figure,) = [f for f in FIGURES if f.game == "cartpole"]
    first, second = training_figures.replay(figure), training_figures.replay(figure)
    ended = [(m["best_iteration"], m["best_return"]) for m in (first, second)]
    assert ended[0] == ended[1], ended
    assert first["best_return"] >= GAMES["cartpole"].solved_threshold, first
    capability, model = training_figures.cpu_capability(), machine.cpu_model()
    assert verdict(figure, first, capability, model) != "DIFFERENT", (
        first,
        model,
        dataclasses.asdict(figure),
    )


def test_an_unknown_game_is_refused_naming_the_known_ones(capsys):
    with pytest.raises(SystemExit) as stop:
        training_figures.main(["--game", "tag"])
    assert stop.value.code == 2
    assert "--game tag: no documented figure; one of ['acrobot'" in capsys.readouterr().err
