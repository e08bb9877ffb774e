"""Tag matchups (trained vs random teams), the policy loader and ``gpu-envs evaluate tag``."""

import json
import math

import pytest
import torch

from gpu_envs import cli
from gpu_envs.commands.evaluate import format_report
from gpu_envs.games.tag.env import TagEnv
from gpu_envs.runs.checkpoint import load_checkpoint, save_checkpoint
from gpu_envs.trainers.matchups import (
    MATCHUPS,
    MatchupReport,
    MatchupResult,
    TeamPolicy,
    count_tags,
    evaluate_matchups,
    load_policy,
    load_tag_checkpoint,
)
from gpu_envs.trainers.policy import greedy_actions

SMALL_TAG = [
    "env.num_taggers=2",
    "env.num_runners=6",
    "env.grid_length=2.0",
    "env.episode_length=12",
    "env.tagging_distance=0.25",
    "env.num_other_agents_observed=3",
    "trainer.num_envs=4",
    "trainer.train_batch_size=48",
    "trainer.total_timesteps=48",
    "trainer.progress_bar=false",
    "trainer.accelerator=cpu",
    "policy.runner.model.fc_dims=[8]",
    "policy.tagger.model.fc_dims=[8]",
    "evaluation.eval_freq=0",
]
# A still world (no acceleration): tagger 0 at the centre, runners 1 and 2 within tagging distance
# (0.1 * 10 = 1), runner 3 far away. Step 1 tags runners 1 and 2, and runner 3 is never tagged.
STILL = dict(
    num_taggers=1,
    num_runners=3,
    grid_length=10.0,
    episode_length=20,
    tagging_distance=0.1,
    min_acceleration=0.0,
    max_acceleration=0.0,
    starting_location_x=[5.0, 5.0, 5.5, 9.0],
    starting_location_y=[5.0, 5.5, 5.0, 9.0],
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A trainer checkpoint of one tiny Tag iteration (tagger and runner policies)."""
    from gpu_envs.runs.config import RunConfig, apply_overrides
    from gpu_envs.runs.presets import preset
    from gpu_envs.trainers.fabric_loop import train

    basedir = tmp_path_factory.mktemp("run")
    config = RunConfig.from_dict(
        apply_overrides(preset("tag"), SMALL_TAG + [f"saving.basedir={basedir}"])
    )
    summary = train(config)
    return f"{summary['experiment']}/ckpt/iteration_1.pth.tar"


def random_policy(seed=0):
    return TeamPolicy({}, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("autoreset", ["disabled", "next_step"])
def test_tags_of_a_still_world_are_counted_once(autoreset):
    # Runner 3 is out of reach: the game runs all 20 steps, past the first "all over?" check.
    env = TagEnv(3, autoreset_mode=autoreset, validate_actions=False, **STILL)
    assert count_tags(env, random_policy(), seed=0).tolist() == [2, 2, 2]
    # Runner 3 within reach too: every game ends at step 1; the steps after it (frozen games with
    # their last tag counts, or reset games tagging again) must not count.
    caught = dict(
        STILL, starting_location_x=[5.0, 5.0, 5.5, 5.5], starting_location_y=[5.0, 5.5, 5.0, 5.5]
    )
    env = TagEnv(3, autoreset_mode=autoreset, validate_actions=False, **caught)
    assert count_tags(env, random_policy(), seed=0).tolist() == [3, 3, 3]


def test_tags_equal_the_runners_that_left_the_game():
    env = TagEnv(
        16,
        autoreset_mode="disabled",
        validate_actions=False,
        num_taggers=2,
        num_runners=6,
        grid_length=2.0,
        episode_length=12,
        tagging_distance=0.25,
    )
    tags = count_tags(env, random_policy(), seed=3)
    left = env.num_runners - env.team_view(env.active, "runner").sum(-1)
    assert torch.equal(tags, left)
    assert 0 < int(tags.sum()) < 16 * env.num_runners


def test_random_vs_random_is_deterministic_for_a_seed():
    env = TagEnv(
        16,
        autoreset_mode="disabled",
        validate_actions=False,
        num_taggers=2,
        num_runners=6,
        grid_length=2.0,
        episode_length=12,
        tagging_distance=0.25,
    )
    first = count_tags(env, random_policy(5), seed=5)
    assert torch.equal(first, count_tags(env, random_policy(5), seed=5))
    assert not torch.equal(first, count_tags(env, random_policy(6), seed=6))


def test_loaded_policy_plays_every_team_with_its_network(checkpoint):
    policy = load_policy(checkpoint)
    env = TagEnv(3, **policy.env_params)
    obs, _ = env.reset(seed=0)
    actions = policy(obs, env)
    assert actions.shape == (3, env.num_agents, 2) and actions.dtype == torch.int64
    assert (actions >= 0).all() and (actions < torch.tensor(env.action_nvec)).all()
    env.step(actions)  # validated by the env

    greedy = load_policy(checkpoint, greedy=True)
    saved = load_checkpoint(checkpoint)["policies"]
    for team in ("tagger", "runner"):
        network = greedy.networks[team]
        assert all(torch.equal(v, saved[team]["model"][k]) for k, v in network.state_dict().items())
        team_obs = env.team_view(obs, team)
        logits, _ = network(team_obs.reshape(-1, env.obs_dim))
        expected = greedy_actions(logits, env.action_nvec).view(3, -1, 2)
        assert torch.equal(env.team_view(greedy(obs, env), team), expected)


def test_loaded_policy_refuses_another_env(checkpoint):
    policy = load_policy(checkpoint)
    env = TagEnv(1, num_taggers=1, num_runners=2, use_full_observation=True)
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError, match="trained with"):
        policy(obs, env)


def test_matchups_are_deterministic_and_ratios_come_from_the_table(checkpoint):
    report = evaluate_matchups(checkpoint, episodes=8, seed=2)
    assert [(r.taggers, r.runners) for r in report.results] == list(MATCHUPS)
    assert all(len(r.tags) == 8 for r in report.results)
    assert report.to_dict() == evaluate_matchups(checkpoint, episodes=8, seed=2).to_dict()
    means = {(r.taggers, r.runners): sum(r.tags) / 8 for r in report.results}
    assert report.tagger_ratio == pytest.approx(
        means["trained", "random"] / means["random", "random"]
    )
    assert report.runner_ratio == pytest.approx(
        means["random", "trained"] / means["random", "random"]
    )
    # The same start states and random draws: random vs random equals a plain random-policy run.
    env = TagEnv(
        8,
        autoreset_mode="disabled",
        validate_actions=False,
        **load_tag_checkpoint(checkpoint).env_params,
    )
    assert count_tags(env, random_policy(2), seed=2).tolist() == report.results[0].tags


def test_report_ratios_targets_and_table():
    results = (
        MatchupResult("random", "random", [2, 2]),
        MatchupResult("trained", "random", [3, 3]),
        MatchupResult("random", "trained", [1, 2]),
        MatchupResult("trained", "trained", [0, 0]),
    )
    report = MatchupReport("c.pth.tar", 2, 0, False, results)
    assert report.tagger_ratio == 1.5 and report.tagger_pass
    assert report.runner_ratio == 0.75 and not report.runner_pass
    assert results[2].stderr == pytest.approx(0.5) and results[0].stderr == 0.0
    assert math.isnan(MatchupResult("random", "random", [4]).stderr)
    text = format_report(report)
    rows = {line[:34].strip(): line[34:].split() for line in text.splitlines()}
    assert rows["trained taggers vs random runners"] == ["3.000", "±", "0.000"]
    assert rows["random taggers vs trained runners"] == ["1.500", "±", "0.500"]
    assert "1.500 (target >= 1.500): learning benchmark target met" in text
    assert "0.750 (target <= 0.667): learning benchmark target not met" in text


def test_cli_prints_the_table_and_writes_json(checkpoint, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert (
        cli.main(["evaluate", "tag", checkpoint, "--episodes", "4", "--greedy", "--json", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["greedy"] and [len(m["tags"]) for m in report["matchups"]] == [4] * 4
    assert (
        "random taggers vs random runners" in text
        and "tagger ratio" in text
        and "runner ratio" in text
    )
    assert f"{report['tagger_ratio']['value']:.3f} (target >= 1.500)" in text


def test_cli_errors(checkpoint, tmp_path):
    corrupt = tmp_path / "corrupt.pth.tar"
    corrupt.write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit, match="corrupt"):
        cli.main(["evaluate", "tag", str(corrupt)])
    with pytest.raises(SystemExit, match="does not exist"):
        cli.main(["evaluate", "tag", str(tmp_path / "missing.pth.tar")])
    state = load_checkpoint(checkpoint)
    state["config"]["name"] = "cartpole"
    cartpole = tmp_path / "cartpole.pth.tar"
    save_checkpoint(state, cartpole)
    with pytest.raises(SystemExit, match="cartpole run"):
        cli.main(["evaluate", "tag", str(cartpole)])
    with pytest.raises(SystemExit, match="--episodes must be >= 1"):
        cli.main(["evaluate", "tag", checkpoint, "--episodes", "0"])
