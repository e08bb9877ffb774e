"""What a run's curves.png draws (the figure's data, ``curves.figure_panels``): per policy the games
against frozen opponents and the self-play games apart (not their mix), the evaluation naming its
opponent, and Tag's random baseline, which is ``gpu-envs evaluate tag``'s random-vs-random row."""

import json
import subprocess
import sys

import pytest

from gpu_envs.runs import curves
from gpu_envs.runs.metrics import LEARNER_METRICS, IterationRecord, cleanrl_metrics

TINY_TAG = [
    "env.num_taggers=1",
    "env.num_runners=3",
    "env.grid_length=2.0",
    "env.episode_length=8",
    "env.num_other_agents_observed=2",
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=96",
    "trainer.progress_bar=false",
    "trainer.compile=false",
    "trainer.accelerator=cpu",
    "policy.runner.model.fc_dims=[8]",
    "policy.tagger.model.fc_dims=[8]",
    "opponents.share=0.5",  # env 0: frozen runners, env 1: frozen taggers, envs 2-3: self-play
    "opponents.pool_size=0",
    "evaluation.eval_freq=1",
    "evaluation.num_episodes=2",
    "evaluation.score_policy=runner",
    "saving.tag=run",
]


@pytest.fixture(scope="module")
def tag_run(tmp_path_factory):
    """The folder of a tiny Tag run with frozen opponents, trained by ``gpu-envs train``."""
    basedir = tmp_path_factory.mktemp("tag")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_envs.cli",
            "train",
            "tag",
            *TINY_TAG,
            f"saving.basedir={basedir}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=basedir,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = (basedir).glob("*/run")
    return folder


@pytest.mark.slow
def test_a_tag_runs_figure_separates_its_games_and_names_the_opponents(tag_run):
    panels = {panel.policy: panel for panel in curves.figure_panels({"tag": [tag_run]})}
    assert sorted(panels) == ["runner", "tagger"]
    labels = {tag: [line.label for line in panel.lines] for tag, panel in panels.items()}
    assert labels["tagger"] == [
        "'tagger' vs frozen 'runner' (initial weights: random play)",
        "'tagger' vs learning 'runner' (self-play)",
    ]
    assert labels["runner"] == [
        "'runner' vs frozen 'tagger' (initial weights: random play)",
        "'runner' vs learning 'tagger' (self-play)",
        "eval: greedy 'runner' vs greedy trained 'tagger'",
    ]
    read = curves.read_curves(tag_run)
    for tag, panel in panels.items():
        assert panel.lines[0].curves == [read[f"vs_frozen/{tag}"]]
        assert panel.lines[1].curves == [read[f"selfplay/{tag}"]]
        assert len(read[f"vs_frozen/{tag}"].values) >= 2  # (an episode ends in every rollout)
    assert panels["runner"].lines[2].curves == [read["eval/runner"]] and read["train/runner"].values


@pytest.mark.slow
def test_the_random_baseline_is_evaluate_tags_random_vs_random(tag_run):
    from gpu_envs.trainers.matchups import evaluate_matchups

    panels = curves.figure_panels({"tag": [tag_run]})
    played = json.loads((tag_run / curves.RANDOM_PLAY_FILE).read_text())
    checkpoint = tag_run / "ckpt" / "ckpt_best.pth.tar"
    report = evaluate_matchups(checkpoint, episodes=100, seed=0)
    assert played["tags_mean"] == report.mean("random", "random")
    for panel in panels:
        ((label, value),) = panel.baselines
        assert value == played["returns"][panel.policy]
        assert label.startswith(f"random play: {value:.1f} (random vs random, ")
        assert f"{played['tags_mean']:.1f} runners tagged per episode" in label
    assert (tag_run / curves.CURVES_FILE).is_file()  # drawn at the run's end


def test_a_one_policy_run_draws_its_training_and_evaluation_without_a_baseline(tmp_path):
    csv = tmp_path / "log" / "csv" / "version_0" / "metrics.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text(
        "charts/episodic_return,charts/train_seconds,eval/mean_return,step\n"
        "10.0,1.0,,512\n,1.5,20.0,512\n30.0,2.0,,1024\n"
    )
    (tmp_path / "total_config.yaml").write_text("name: cartpole\npolicy:\n  agent: {}\n")
    (panel,) = curves.figure_panels({"cartpole": [tmp_path]})
    assert panel.policy is None and panel.baselines == []
    assert [line.label for line in panel.lines] == ["train", "eval: greedy"]
    assert panel.lines[0].curves[0].values == [10.0, 30.0]
    assert not (tmp_path / curves.RANDOM_PLAY_FILE).exists()


def test_the_metrics_hold_the_games_against_frozen_opponents_apart():
    def record(**sums: float) -> IterationRecord:
        stats = dict.fromkeys(LEARNER_METRICS, 0.0)
        stats |= {"episode_count": 3.0, "return_sum": 30.0, "return_sumsq": 300.0}
        stats |= {
            "length_sum": 24.0,
            "agentstep_count": 96.0,
            "return_max": 10.0,
            "return_min": 10.0,
        }
        return IterationRecord(1, 32, {"tagger": stats | sums, "runner": stats})

    metrics = cleanrl_metrics(
        [
            record(vs_frozen_episode_count=1.0, vs_frozen_return_sum=40.0),
            record(selfplay_episode_count=2.0, selfplay_return_sum=10.0),
        ],
        ["tagger", "runner"],
    )
    assert metrics["charts/tagger/episodic_return_vs_frozen"] == 40.0
    assert metrics["charts/tagger/episodic_return_selfplay"] == 5.0
    assert "charts/runner/episodic_return_vs_frozen" not in metrics  # (no such game ended)
