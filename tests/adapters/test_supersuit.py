"""The PettingZoo + SB3 flow through SuperSuit trains Tag: docs/using-with-marl.md's recipes run
as written (SB3's PPO learns a few thousand steps on finite observations), and what SB3 sees slot by
slot (observations, rewards, dones, VecMonitor's episode statistics) is the games' own, for runners
that stay and for runners that leave through ``BlackDeath``."""

import math

import numpy as np
import pytest
import torch

ss = pytest.importorskip("supersuit")
pytest.importorskip("stable_baselines3")
from stable_baselines3.common.vec_env import VecMonitor  # noqa: E402

from gpu_envs import tag_v0  # noqa: E402
from gpu_envs.adapters.supersuit import BlackDeath  # noqa: E402
from tests.helpers.marl_docs import run_block, section_blocks  # noqa: E402

SECTION = "PettingZoo + SB3 through SuperSuit"
pytestmark = pytest.mark.filterwarnings("ignore:The `render_mode` attribute:UserWarning")


@pytest.fixture(scope="module")
def docs_run() -> list[tuple[dict, str, str | None]]:
    """Each block of the section run in order in one namespace: (namespace after it, printed,
    what the page says it prints)."""
    namespace: dict = {"__name__": "__docs__"}
    runs = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: more threads only contend on a shared machine
    try:
        for i, (code, expected) in enumerate(section_blocks(SECTION)):
            printed = run_block(code, namespace, f"{SECTION} #{i}")
            runs.append((dict(namespace), printed, expected))
    finally:
        torch.set_num_threads(threads)
    return runs


def test_docs_blocks_print_what_the_page_says(docs_run):
    assert len(docs_run) == 4
    for _, printed, expected in docs_run:
        if expected is not None:
            assert printed == expected


def test_docs_recipes_train_ppo_on_finite_observations(docs_run):
    for namespace, _, _ in docs_run[:2]:
        model, vec_env = namespace["model"], namespace["vec_env"]
        assert model.num_timesteps == 4096
        observations = model.rollout_buffer.observations  # the last rollout, flattened
        assert observations.shape == (64 * vec_env.num_envs, *vec_env.observation_space.shape)
        assert np.isfinite(observations).all()
        assert all(vec_env.observation_space.contains(row) for row in observations)
        assert math.isfinite(model.logger.name_to_value["train/loss"])
        lengths = [episode["l"] for episode in model.ep_info_buffer]
        assert lengths and max(lengths) <= namespace["params"]["episode_length"]


def random_actions(rng: np.random.Generator, nvec: np.ndarray, slots: int) -> np.ndarray:
    return rng.integers(0, nvec, size=(slots, len(nvec)))


@pytest.mark.parametrize("runners_exit", [False, True], ids=["runners-stay", "black-death"])
def test_every_slot_sees_its_agents_game(runners_exit):
    """SB3's view through SuperSuit (and ``BlackDeath`` where runners leave) against the same
    games played directly on ``tag_v0.parallel_env`` with the same seeds and actions."""
    params = dict(
        num_taggers=1,
        num_runners=3,
        grid_length=2.0,
        episode_length=25,
        tagging_distance=0.1,
        observe_self=True,
        runner_exits_game_after_tagged=runners_exit,
    )

    def game():
        return tag_v0.parallel_env(**params)

    copies = 3
    flow = ss.pettingzoo_env_to_vec_env_v1(BlackDeath(game()) if runners_exit else game())
    flow = ss.concat_vec_envs_v1(flow, copies, num_cpus=0, base_class="stable_baselines3")
    flow.venv.reset(seed=10)
    flow = VecMonitor(flow)
    obs = flow.reset()

    twins = [game() for _ in range(copies)]
    agents = twins[0].possible_agents
    n, zeros = len(agents), np.zeros(twins[0].observation_space(agents[0]).shape, np.float32)
    twin_obs = []
    for i, twin in enumerate(twins):
        twin.reset(seed=10 + i)
        twin_obs.append(twin.reset()[0])
    returns, length = np.zeros((copies, n)), np.zeros(copies, dtype=int)
    rng, nvec = np.random.default_rng(0), flow.action_space.nvec
    games_ended, agents_left_early = 0, 0

    for _ in range(120):
        for i in range(copies):
            for j, agent in enumerate(agents):
                np.testing.assert_array_equal(obs[i * n + j], twin_obs[i].get(agent, zeros))
        actions = random_actions(rng, nvec, copies * n)
        obs, rewards, dones, infos = flow.step(actions)
        assert np.isfinite(obs).all()
        for i, twin in enumerate(twins):
            live = {a: actions[i * n + j] for j, a in enumerate(agents) if a in twin.agents}
            before = len(twin.agents)
            final_obs, twin_rewards, _, _, _ = twin.step(live)
            length[i] += 1
            slots = slice(i * n, (i + 1) * n)
            expected = [twin_rewards.get(agent, 0.0) for agent in agents]
            np.testing.assert_allclose(rewards[slots], expected, rtol=0, atol=1e-6)
            returns[i] += expected
            game_over = not twin.agents
            assert (dones[slots] == game_over).all()
            if not game_over:
                agents_left_early += before - len(twin.agents)
                twin_obs[i] = final_obs
                continue
            games_ended += 1
            for j, agent in enumerate(agents):
                info = infos[i * n + j]
                assert info["episode"]["l"] == length[i]
                assert info["episode"]["r"] == pytest.approx(returns[i, j], abs=1e-5)
                np.testing.assert_array_equal(
                    info["terminal_observation"], final_obs.get(agent, zeros)
                )
            twin_obs[i], returns[i], length[i] = twin.reset()[0], 0.0, 0

    assert games_ended >= copies * 4
    assert (agents_left_early > 0) == runners_exit
