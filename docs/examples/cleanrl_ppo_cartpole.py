"""PPO on gpu_envs/CartPole-v1 in one file, CleanRL style, with the whole rollout on the device.

    python docs/examples/cleanrl_ppo_cartpole.py --device cuda --num-envs 64 --total-timesteps
    500000

The envs come from ``gym.make_vec("gpu_envs/CartPole-v1", device=...)``: observations, rewards and
done flags are torch tensors on ``--device``, and ``gpu_envs.RecordEpisodeStatistics`` keeps the
episode returns there too. The only host synchronisation is the log line once per iteration.

Differences from CleanRL's ``ppo.py``: SAME_STEP autoreset (a finished env starts its next
episode in the same step and hands its last observation in ``info["final_obs"]``), which lets the
rewards of truncated episodes bootstrap on the value of that last observation.
"""

import argparse
import dataclasses
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from gymnasium.vector import AutoresetMode
from torch.distributions.categorical import Categorical

import gpu_envs


@dataclass
class Args:
    seed: int = 1
    device: str = "cpu"
    total_timesteps: int = 500_000
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    num_envs: int = 4
    num_steps: int = 128
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5


def parse_args(argv=None) -> Args:
    """One ``--flag`` per ``Args`` field (``--no-flag`` turns a bool off)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        flag = "--" + field.name.replace("_", "-")
        if field.type is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=field.default)
        else:
            parser.add_argument(flag, type=field.type, default=field.default)
    return Args(**vars(parser.parse_args(argv)))


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, num_actions: int):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, num_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def main(args: Args) -> dict:
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    if num_iterations < 1:
        raise ValueError(f"--total-timesteps must be at least num_envs * num_steps = {batch_size}")

    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    # Env set-up: tensors on `device`; sampled actions are always valid, so skip the check (on CUDA
    # it would cost a host synchronisation per step).
    envs = gpu_envs.RecordEpisodeStatistics(
        gym.make_vec(
            "gpu_envs/CartPole-v1",
            num_envs=args.num_envs,
            device=device,
            autoreset_mode=AutoresetMode.SAME_STEP,
            validate_actions=False,
        )
    )
    obs_dim = envs.single_observation_space.shape[0]
    agent = Agent(obs_dim, envs.single_action_space.n).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # Rollout storage, on the device.
    obs = torch.zeros((args.num_steps, args.num_envs, obs_dim), device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)

    global_step = 0
    start_time = time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_done = torch.zeros(args.num_envs, device=device)
    summary = {}

    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        # ---- collect num_steps steps of every env
        returns_sum = torch.zeros((), dtype=torch.float64, device=device)
        episodes = torch.zeros((), dtype=torch.int64, device=device)
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, terminations, truncations, infos = envs.step(action)
            # A truncated episode did not end by the rules: bootstrap on its last observation.
            with torch.no_grad():
                final_values = agent.get_value(infos["final_obs"]).flatten()
            bootstrap = (truncations & ~terminations).float()
            rewards[step] = reward + args.gamma * final_values * bootstrap
            next_done = (terminations | truncations).float()

            finished = infos["_episode"]
            returns_sum += torch.where(finished, infos["episode"]["r"], 0.0).sum()
            episodes += finished.sum()

        # ---- generalised advantage estimation
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (
                    delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                )
            returns = advantages + values

        # ---- flatten the batch
        b_obs = obs.reshape((-1, obs_dim))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # ---- optimise the policy and the value network
        for _epoch in range(args.update_epochs):
            b_inds = torch.randperm(batch_size, device=device)
            for start in range(0, batch_size, minibatch_size):
                mb_inds = b_inds[start : start + minibatch_size]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (
                        mb_advantages.std() + 1e-8
                    )

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(
                    ratio, 1 - args.clip_coef, 1 + args.clip_coef
                )
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        # ---- log (the one host synchronisation of the iteration)
        num_episodes = int(episodes)
        mean_return = float(returns_sum) / num_episodes if num_episodes else float("nan")
        sps = int(global_step / (time.time() - start_time))
        print(
            f"iteration {iteration}/{num_iterations} global_step={global_step} "
            f"episodes={num_episodes} mean_return={mean_return:.1f} value_loss={v_loss.item():.3f} "
            f"SPS={sps}",
            flush=True,
        )
        summary = {
            "global_step": global_step,
            "episodes": num_episodes,
            "mean_return": mean_return,
            "sps": sps,
        }

    envs.close()
    return summary


if __name__ == "__main__":
    main(parse_args())
