"""AgileRL's IPPO example (its docs' "Example Training Loop", 8 ``AsyncPettingZooVecEnv``
workers) on Tag, ``gpu_envs.tag_v0.parallel_env(**QUICK_TAG)``, then the taggers scored against
random taggers as ``gpu-envs evaluate tag`` scores them.

Changed from the example: the env line; one wrapper, ``LeftAgentsKept``, because AgileRL
expects every agent in every step (MPE's agents never leave) while Tag's runners leave the game
when tagged; and the loop collects ``learn_step`` steps per update until ``MAX_STEPS`` (the docs'
loop runs ``learn_step`` updates before it reads its budget).

Score: runners tagged per episode (one game each, 100 games seeded 0..99, the same start states
in every matchup; gpu_envs.trainers.matchups.count_tags) when IPPO's taggers (sampled actions)
play uniform random runners, divided by the same when random taggers play them: the tagger ratio
of ``gpu-envs evaluate tag`` (its target 1.5). Printed for the untrained and the trained
taggers; exits 1 unless training raised the ratio by ``MIN_GAIN`` or more. Checked with
``.ci/client-check agilerl`` (docs/using-with-agilerl.md).
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import torch
from agilerl.algorithms import IPPO
from agilerl.vector.pz_async_vec_env import AsyncPettingZooVecEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper

from gpu_envs import tag_v0
from gpu_envs.games.tag.quick import QUICK_TAG
from gpu_envs.trainers.matchups import count_tags

NUM_ENVS = 8  # the example's
MAX_STEPS = 24_576  # env steps (8 workers x 3072): 6 updates of IPPO's learn_step 4096
EPISODES = 100
MIN_GAIN = 0.2  # tagger ratio after training minus before


class LeftAgentsKept(BaseParallelWrapper):
    """Keeps the agents that left the game (tagged runners) in AgileRL's view until the game
    ends: their last observation, reward 0, terminated; their actions are dropped. AgileRL's
    vector env sends an action for every agent (Tag refuses actions of agents not in
    ``agents``) and hands NaN observations of absent agents to the policy (its MultiDiscrete
    sampling then fails)."""

    def reset(self, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        self._last = dict(obs)
        return obs, infos

    def step(self, actions):
        in_game = {agent: actions[agent] for agent in self.env.agents}
        obs, rewards, terminations, truncations, infos = self.env.step(in_game)
        self._last.update(obs)
        for agent in self.env.possible_agents:
            if agent not in obs:
                obs[agent], rewards[agent], infos[agent] = self._last[agent], 0.0, {}
                terminations[agent], truncations[agent] = True, False
        return obs, rewards, terminations, truncations, infos


def tag_env():
    """One game of the quick Tag, as each of AgileRL's workers builds it."""
    return LeftAgentsKept(tag_v0.parallel_env(**QUICK_TAG))


def train(agent: IPPO, env: AsyncPettingZooVecEnv) -> list[float]:
    """The example's collection and update loop; returns the mean score of each update's
    completed episodes (all agents' rewards summed)."""
    curve = []
    while agent.steps < MAX_STEPS:
        obs, info = env.reset()
        scores = np.zeros((NUM_ENVS, len(agent.shared_agent_ids)))
        completed_episode_scores = []
        steps = 0
        states = {agent_id: [] for agent_id in agent.agent_ids}
        actions = {agent_id: [] for agent_id in agent.agent_ids}
        log_probs = {agent_id: [] for agent_id in agent.agent_ids}
        entropies = {agent_id: [] for agent_id in agent.agent_ids}
        rewards = {agent_id: [] for agent_id in agent.agent_ids}
        dones = {agent_id: [] for agent_id in agent.agent_ids}
        values = {agent_id: [] for agent_id in agent.agent_ids}
        done = {agent_id: np.zeros(NUM_ENVS) for agent_id in agent.agent_ids}
        for _ in range(-(agent.learn_step // -NUM_ENVS)):
            action, log_prob, entropy, value = agent.get_action(obs=obs, infos=info)
            next_obs, reward, termination, truncation, info = env.step(action)
            agent_rewards = np.array(list(reward.values())).transpose()
            agent_rewards = np.where(np.isnan(agent_rewards), 0, agent_rewards)
            scores += np.sum(agent_rewards, axis=-1)[:, np.newaxis]
            steps += NUM_ENVS
            for agent_id in obs:
                states[agent_id].append(obs[agent_id])
                rewards[agent_id].append(reward[agent_id])
                actions[agent_id].append(action[agent_id])
                log_probs[agent_id].append(log_prob[agent_id])
                entropies[agent_id].append(entropy[agent_id])
                values[agent_id].append(value[agent_id])
                dones[agent_id].append(done[agent_id])
            next_done = {}
            for agent_id in termination:
                terminated, truncated = termination[agent_id], truncation[agent_id]
                mask = ~(np.isnan(terminated) | np.isnan(truncated))
                result = np.full_like(mask, np.nan, dtype=float)
                result[mask] = np.logical_or(terminated[mask], truncated[mask])
                next_done[agent_id] = result
            obs, done = next_obs, next_done
            for idx, agent_dones in enumerate(zip(*next_done.values())):
                if all(agent_dones):
                    completed_episode_scores.append(list(scores[idx]))
                    agent.scores.append(list(scores[idx]))
                    scores[idx].fill(0)
                    done = {agent_id: np.zeros(NUM_ENVS) for agent_id in agent.agent_ids}
        agent.learn((states, actions, log_probs, rewards, dones, values, next_obs, next_done))
        agent.steps += steps
        curve.append(float(np.mean(completed_episode_scores)) if completed_episode_scores else 0.0)
        print(f"  steps {agent.steps:6d}  mean episode score {curve[-1]:8.2f}", flush=True)
    return curve


def runners_tagged(agent: IPPO | None, seed: int = 0) -> float:
    """Mean runners tagged per episode when ``agent``'s taggers (random ones for None) play random
    runners, over ``EPISODES`` games seeded ``seed + i``."""
    env = tag_v0.vector_env(
        EPISODES, "cpu", autoreset_mode="disabled", validate_actions=False, **QUICK_TAG
    )
    generator = torch.Generator().manual_seed(seed)
    taggers = [name for name in env.agent_names if name.startswith("tagger")]

    def policy(obs: torch.Tensor, env) -> torch.Tensor:
        nvec = tuple(env.action_nvec)
        chosen = torch.stack(
            [torch.randint(n, obs.shape[:2], generator=generator) for n in nvec], -1
        )
        if agent is not None:
            team_obs = env.team_view(obs, "tagger")
            picked, *_ = agent.get_action(
                obs={name: team_obs[:, i].numpy() for i, name in enumerate(taggers)}
            )
            team = np.stack([picked[name] for name in taggers], 1).reshape(EPISODES, -1, 2)
            env.team_view(chosen, "tagger").copy_(torch.as_tensor(team))
        return chosen

    try:
        return statistics.fmean(count_tags(env, policy, seed).tolist())
    finally:
        env.close()


def main() -> int:
    torch.manual_seed(0)
    env = AsyncPettingZooVecEnv([tag_env for _ in range(NUM_ENVS)])
    env.reset(seed=0)
    agent = IPPO(
        observation_spaces=[env.single_observation_space(a) for a in env.agents],
        action_spaces=[env.single_action_space(a) for a in env.agents],
        agent_ids=list(env.agents),
        device="cpu",
        batch_size=128,
    )
    random_taggers = runners_tagged(None)
    before = runners_tagged(agent) / random_taggers
    start = time.perf_counter()
    train(agent, env)
    seconds = time.perf_counter() - start
    env.close()
    after = runners_tagged(agent) / random_taggers
    print(f"IPPO on Tag {QUICK_TAG}")
    print(f"trained for {agent.steps} env steps ({NUM_ENVS} workers) in {seconds:.1f} s")
    print(f"runners tagged per episode by random taggers (vs random runners): {random_taggers:.2f}")
    print(
        f"tagger ratio (IPPO taggers / random taggers): before training {before:.2f}, "
        f"after {after:.2f} (gpu-envs evaluate tag's target 1.5)"
    )
    return 0 if after - before >= MIN_GAIN else 1


if __name__ == "__main__":
    sys.exit(main())
