"""RLlib's PPO on quick Tag, one policy per team (independent PPO), through RLlib's PettingZoo
wrapper: the taggers learn against runners that keep their initial, near-uniform policy.

    .ci/client-check rllib ippo_tag.py

Quick Tag (``gpu_envs.games.tag.quick.QUICK_TAG``, docs/tag-quick.md) is the small Tag
configuration chosen so that taggers visibly improve within an example's budget; the env is one
game as a PettingZoo ``ParallelEnv`` (``gpu_envs.tag_v0.parallel_env``) wrapped in RLlib's
``ParallelPettingZooEnv``. Before and after ``ENV_STEPS`` env steps of training, it plays
``EPISODES`` games of each matchup the way ``gpu-envs evaluate tag`` does (the same start states
for every matchup, runners tagged per episode) and prints the taggers' score against random
taggers'; exits 1 when the trained taggers do not beat random taggers by ``TARGET``.
"""

import sys
import time

import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
from ray.tune.registry import register_env

from gpu_envs import tag_v0
from gpu_envs.games.tag.quick import QUICK_TAG
from gpu_envs.trainers.matchups import count_tags

ENV_STEPS = 20_000
BATCH = 1_000  # env steps per iteration
EPISODES = 400
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0
TARGET = 1.2  # trained taggers / random taggers, runners tagged per episode

# One game per env step and small networks: torch's extra threads only contend (on a busy 2-core
# box an iteration of 2,000 env steps took 154 s with torch's default threads, 21 s with one).
torch.set_num_threads(1)
register_env("quick_tag", lambda _: ParallelPettingZooEnv(tag_v0.parallel_env(**QUICK_TAG)))

config = (
    PPOConfig()
    .environment("quick_tag")
    .env_runners(num_env_runners=0)
    .multi_agent(
        policies={"tagger", "runner"},
        policy_mapping_fn=lambda agent_id, *args, **kwargs: agent_id.split("_")[0],
        policies_to_train=["tagger"],
    )
    .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], vf_share_layers=False))
    .training(
        lr=0.005,
        gamma=0.98,
        lambda_=0.95,
        entropy_coeff=0.01,
        use_kl_loss=False,
        grad_clip=0.5,
        num_epochs=16,
        minibatch_size=200,
        train_batch_size_per_learner=BATCH,
    )
    .debugging(seed=SEED)
)


def score(taggers) -> tuple[float, float]:
    """Runners tagged per episode (mean, standard error) when ``taggers`` (an RLModule, or None
    for uniform random actions) chase random runners: EPISODES games seeded SEED + i."""
    env = tag_v0.vector_env(
        EPISODES, "cpu", autoreset_mode="disabled", validate_actions=False, **QUICK_TAG
    )
    generator = torch.Generator().manual_seed(SEED)
    nvec = env.action_nvec

    def policy(obs, env):
        actions = torch.stack(
            [torch.randint(n, obs.shape[:2], generator=generator) for n in nvec], -1
        )
        if taggers is not None:
            team = env.team_view(obs, "tagger")
            with torch.no_grad():
                logits = taggers.forward_inference({"obs": team.reshape(-1, team.shape[-1])})[
                    "action_dist_inputs"
                ]
            parts = [
                torch.multinomial(torch.softmax(part, -1), 1, generator=generator)
                for part in logits.split(list(nvec), -1)
            ]
            env.team_view(actions, "tagger").copy_(torch.cat(parts, -1).view(*team.shape[:2], -1))
        return actions

    tags = count_tags(env, policy, SEED).double()
    env.close()
    return tags.mean().item(), (tags.std() / len(tags) ** 0.5).item()


algo = config.build_algo()
random_mean, random_se = score(None)
before_mean, before_se = score(algo.get_module("tagger"))
print(f"quick Tag {QUICK_TAG}")
print(f"random taggers vs random runners:  {random_mean:.3f} ± {random_se:.3f} tagged per episode")
print(f"taggers before training:           {before_mean:.3f} ± {before_se:.3f}")
steps, start = 0, time.perf_counter()
while steps < ENV_STEPS:
    result = algo.train()
    steps = int(result["env_runners"]["num_env_steps_sampled_lifetime"])
    returns = result["env_runners"].get("module_episode_returns_mean", {})
    print(
        f"env steps {steps:6d}  tagger return {returns.get('tagger', float('nan')):6.3f}  "
        f"{time.perf_counter() - start:6.1f} s",
        flush=True,
    )
after_mean, after_se = score(algo.get_module("tagger"))
algo.stop()
ratio = after_mean / random_mean
print(f"taggers after {steps} env steps:     {after_mean:.3f} ± {after_se:.3f}")
print(f"tagger ratio (trained / random): {ratio:.3f} (target >= {TARGET})")
sys.exit(0 if ratio >= TARGET else 1)
