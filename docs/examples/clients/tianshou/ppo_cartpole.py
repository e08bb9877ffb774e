"""Tianshou's own PPO CartPole example (test/discrete/test_ppo_discrete.py of Tianshou 2.0.1) on
``gpu_envs/CartPole-v1`` and on gymnasium's ``CartPole-v1``: the same learning, and the wall time.

The example is unchanged except for the env id: ``gym.make`` single envs in Tianshou's
``DummyVectorEnv`` (20 training envs, 100 test envs), seeded as the example seeds them, trained
until the test return reaches 195. Each (env, round) runs in a fresh process, the two envs
interleaved for ``--rounds`` rounds (in turn first). Exits 1 unless both envs learn, and learn
identically: the same test returns, the same steps and the same trained weights. Checked with
``.ci/client-check tianshou`` (docs/using-with-tianshou.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import gymnasium as gym
import numpy as np
import torch
from tianshou.algorithm import PPO
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, CollectStats, VectorReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.trainer import OnPolicyTrainerParams
from tianshou.utils import TensorboardLogger
from tianshou.utils.net.common import ActorCritic, Net
from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic
from tianshou.utils.space_info import SpaceInfo
from torch.utils.tensorboard import SummaryWriter

import gpu_envs  # noqa: F401  (registers gpu_envs/CartPole-v1)

TASKS = ("gpu_envs/CartPole-v1", "CartPole-v1")
REWARD_THRESHOLD = 195  # the example's own for CartPole-v1


def example_args(task: str) -> argparse.Namespace:
    """The example's argument defaults (its get_args()), with ``task`` as the env id."""
    return argparse.Namespace(
        task=task,
        seed=1626,
        buffer_size=20000,
        lr=3e-4,
        gamma=0.99,
        epoch=10,
        epoch_num_steps=50000,
        collection_step_num_env_steps=2000,
        update_step_num_repetitions=10,
        batch_size=64,
        hidden_sizes=[64, 64],
        num_training_envs=20,
        num_test_envs=100,
        device="cpu",
        vf_coef=0.5,
        ent_coef=0.0,
        eps_clip=0.2,
        max_grad_norm=0.5,
        gae_lambda=0.95,
        return_scaling=0,
        advantage_normalization=0,
        recompute_adv=0,
        dual_clip=None,
        value_clip=0,
    )


def train(args: argparse.Namespace, logdir: str) -> dict:
    """The example's test_ppo body (its CPU branch): what it learned and how long it took."""
    env = gym.make(args.task)
    space_info = SpaceInfo.from_env(env)
    args.state_shape = space_info.observation_info.obs_shape
    args.action_shape = space_info.action_info.action_shape
    training_envs = DummyVectorEnv(
        [lambda: gym.make(args.task) for _ in range(args.num_training_envs)]
    )
    test_envs = DummyVectorEnv([lambda: gym.make(args.task) for _ in range(args.num_test_envs)])
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    training_envs.seed(args.seed)
    test_envs.seed(args.seed)
    net = Net(state_shape=args.state_shape, hidden_sizes=args.hidden_sizes)
    actor = DiscreteActor(preprocess_net=net, action_shape=args.action_shape).to(args.device)
    critic = DiscreteCritic(preprocess_net=net).to(args.device)
    actor_critic = ActorCritic(actor, critic)
    for m in actor_critic.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.orthogonal_(m.weight)
            torch.nn.init.zeros_(m.bias)
    policy = DiscreteActorPolicy(
        actor=actor,
        dist_fn=torch.distributions.Categorical,
        action_space=env.action_space,
        deterministic_eval=True,
    )
    algorithm = PPO(
        policy=policy,
        critic=critic,
        optim=AdamOptimizerFactory(lr=args.lr),
        gamma=args.gamma,
        max_grad_norm=args.max_grad_norm,
        eps_clip=args.eps_clip,
        vf_coef=args.vf_coef,
        ent_coef=args.ent_coef,
        gae_lambda=args.gae_lambda,
        return_scaling=args.return_scaling,
        dual_clip=args.dual_clip,
        value_clip=args.value_clip,
        advantage_normalization=args.advantage_normalization,
        recompute_advantage=args.recompute_adv,
    )
    training_collector = Collector[CollectStats](
        algorithm, training_envs, VectorReplayBuffer(args.buffer_size, len(training_envs))
    )
    test_collector = Collector[CollectStats](algorithm, test_envs)
    logger = TensorboardLogger(SummaryWriter(logdir))
    test_returns: list[float] = []

    def stop_fn(mean_rewards: float) -> bool:
        test_returns.append(float(mean_rewards))
        return mean_rewards >= REWARD_THRESHOLD

    result = algorithm.run_training(
        OnPolicyTrainerParams(
            training_collector=training_collector,
            test_collector=test_collector,
            max_epochs=args.epoch,
            epoch_num_steps=args.epoch_num_steps,
            update_step_num_repetitions=args.update_step_num_repetitions,
            test_step_num_episodes=args.num_test_envs,
            batch_size=args.batch_size,
            collection_step_num_env_steps=args.collection_step_num_env_steps,
            stop_fn=stop_fn,
            logger=logger,
            test_in_training=True,
        )
    )
    weights = hashlib.sha256()
    for tensor in algorithm.state_dict().values():
        if isinstance(tensor, torch.Tensor):
            weights.update(tensor.detach().cpu().numpy().tobytes())
    return {
        "best_reward": float(result.best_reward),
        "train_step": int(result.train_step),
        "test_returns": test_returns,
        "weights": weights.hexdigest()[:16],
        "training_s": result.timing.total_time,
    }


def run_in_fresh_process(task: str) -> dict:
    """One run of the example in its own interpreter; adds the whole process's wall time and CPU
    time (user + system: the steadier figure on a loaded machine)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--one", task], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime
    if out.returncode != 0:
        lines = [line for line in out.stderr.splitlines() if "Epoch #" not in line]
        sys.exit(f"the example on {task} failed:\n" + "\n".join(lines[-40:]))
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process_s": wall, "cpu_s": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--one", metavar="TASK", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory() as logdir:
            print(json.dumps(train(example_args(args.one), logdir)))
        return 0
    runs: dict[str, list[dict]] = {task: [] for task in TASKS}
    for round_ in range(args.rounds):
        order = TASKS if round_ % 2 == 0 else TASKS[::-1]
        for task in order:
            run = run_in_fresh_process(task)
            runs[task].append(run)
            print(
                f"round {round_ + 1} {task:22s} process {run['process_s']:6.1f} s "
                f"(CPU {run['cpu_s']:6.1f} s)  "
                f"training {run['training_s']:6.1f} s  steps {run['train_step']}  "
                f"best {run['best_reward']:.1f}  weights {run['weights']}",
                flush=True,
            )
    ours, theirs = (runs[task] for task in TASKS)
    print(f"returns seen by stop_fn, ours:        {ours[0]['test_returns']}")
    print(f"returns seen by stop_fn, gymnasium's: {theirs[0]['test_returns']}")
    for key in ("process_s", "cpu_s", "training_s"):
        ratio = statistics.median(a[key] / b[key] for a, b in zip(ours, theirs))
        print(
            f"median {key:10s}: ours {statistics.median(r[key] for r in ours):6.1f} s, "
            f"gymnasium's {statistics.median(r[key] for r in theirs):6.1f} s, "
            f"ours/gymnasium's {ratio:.2f}x (median of the rounds' ratios)"
        )
    learned = [r["best_reward"] >= REWARD_THRESHOLD for r in ours + theirs]
    same = {(r["weights"], r["train_step"], tuple(r["test_returns"])) for r in ours + theirs}
    print(f"learned to {REWARD_THRESHOLD} in every run: {all(learned)}")
    print(f"identical learning (test returns, steps, weights) in every run: {len(same) == 1}")
    return 0 if all(learned) and len(same) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
