"""Quick Tag (``gpu_envs.games.tag.quick.QUICK_TAG``) builds and plays on every Tag face, its
``tag-quick`` preset validates, and that preset's taggers, trained briefly in a fresh process as a
user runs it, beat random taggers under ``gpu-envs evaluate tag`` (docs/tag-quick.md)."""

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from pettingzoo.test import parallel_api_test

from gpu_envs import tag_v0
from gpu_envs.games.tag.env import TagEnv
from gpu_envs.games.tag.quick import QUICK_TAG
from gpu_envs.runs.config import RunConfig
from gpu_envs.runs.presets import preset

AGENTS = QUICK_TAG["num_taggers"] + QUICK_TAG["num_runners"]


def test_quick_tag_is_a_parallel_env_that_passes_pettingzoos_api_test():
    env = tag_v0.parallel_env(**QUICK_TAG)
    parallel_api_test(env, num_cycles=2 * QUICK_TAG["episode_length"])
    assert len(env.possible_agents) == AGENTS


def test_quick_tag_on_the_aec_face_plays_to_its_end():
    env = tag_v0.env(**QUICK_TAG)
    env.reset(seed=3)
    for agent in env.agent_iter(max_iter=100 * AGENTS):
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else env.action_space(agent).sample())
    assert not env.agents


@pytest.mark.parametrize("array", ["torch", "numpy"])
def test_quick_tag_on_the_gymnasium_rows(array):
    envs = gym.make_vec("gpu_envs/Tag-v0", num_envs=3, array=array, **QUICK_TAG)
    obs, _ = envs.reset(seed=0)
    assert tuple(obs.shape) == (3 * AGENTS, 27)
    obs, rewards, *_ = envs.step(envs.action_space.sample())
    assert tuple(np.asarray(rewards).shape) == (3 * AGENTS,)
    envs.close()


def test_quick_tag_on_the_batched_env_tags_runners_in_its_episode():
    env = TagEnv(8, "cpu", **QUICK_TAG)
    env.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    tags = 0
    for _ in range(QUICK_TAG["episode_length"]):
        actions = torch.stack(
            [torch.randint(n, (8, AGENTS), generator=generator) for n in env.action_nvec], -1
        )
        env.step(actions)
        tags += int(env.team_view(env.tag_count, "runner").sum())
    assert env.action_nvec == (3, 3) and env.obs_dim == 27
    assert tags > 0  # random taggers tag some runners: the reward the taggers learn from


def test_the_tag_quick_preset_validates_and_plays_quick_tag():
    config = RunConfig.from_dict(preset("tag-quick"))
    assert config.game == "tag"
    assert dict(config.env) == QUICK_TAG
    assert config.policy["tagger"].to_train and not config.policy["runner"].to_train
    assert config.trainer.total_timesteps <= 30_000  # within the MARL examples' budgets


def _gpu_envs(*argv: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_envs.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


@pytest.mark.slow
def test_tag_quick_taggers_beat_random_taggers_after_a_short_run(tmp_path):
    trained = _gpu_envs(
        "train",
        "tag-quick",
        "trainer.progress_bar=false",
        f"saving.basedir={tmp_path}",
        cwd=tmp_path,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    checkpoint = trained.stdout.split("latest checkpoint: ")[1].split()[0]
    report = tmp_path / "report.json"
    scored = _gpu_envs(
        "evaluate", "tag", checkpoint, "--episodes", "200", "--json", str(report), cwd=tmp_path
    )
    assert scored.returncode == 0, scored.stderr[-3000:]
    ratio = json.loads(report.read_text())["tagger_ratio"]["value"]
    assert ratio >= 1.25, scored.stdout  # seeds 1-3 gave 1.42-1.64 after 24k env steps
