"""Bundled run configs: ``cartpole`` and ``pendulum`` (tuned for fast CPU learning) and ``tag`` (the
seed config).

Each preset is plain data in the ``RunConfig`` shape; ``preset(name)`` returns a fresh deep copy.
"""

from __future__ import annotations

import copy

from gpu_envs.tag_params import seed_config

# Tuned for wall-clock on a small CPU, where every torch call costs microseconds whatever its size:
# many envs with short rollouts (few step calls per sample), one full-batch minibatch (10 optimiser
# steps per 512 samples), one hidden layer of 64 tanh units (a third fewer calls per gradient step
# than 64x64, and it needs fewer samples: docs/benchmarks-trainers.md), and SB3 rl-zoo's discounting
# (gamma 0.98, GAE lambda 0.8). The gradient step is compiled at warm-up (torch.compile of loss,
# gradient, clipping and Adam as one graph: 2.4x faster updates, for 5-15 s of compiling). Stops at
# CartPole-v1's reward threshold (475, greedy evaluation every 2 iterations).
CARTPOLE = dict(
    name="cartpole",
    env=dict(max_episode_steps=500),
    trainer=dict(
        num_envs=64,
        train_batch_size=64 * 8,
        num_episodes=200,
        total_timesteps=100_000,
        seed=1,
        accelerator="cpu",
        torch_threads=1,
        compile=True,
    ),
    policy=dict(
        agent=dict(
            to_train=True,
            algorithm="PPO",
            gamma=0.98,
            lr=0.003,
            gae_lambda=0.8,
            vf_loss_coeff=0.5,
            entropy_coeff=0.0,
            clip_param=0.2,
            update_epochs=10,
            num_minibatches=1,
            anneal_lr=True,
            model=dict(type="fully_connected", fc_dims=[64], model_ckpt_filepath=""),
        ),
    ),
    saving=dict(
        metrics_log_freq=10,
        model_params_save_freq=100,
        basedir="experiments",
        name="cartpole_ppo",
        tag="example",
    ),
    evaluation=dict(eval_freq=2, num_episodes=10, stop_value=475.0),
)


# Pendulum-v1 with the Gaussian head, CARTPOLE's recipe with Pendulum's numbers: more envs and
# longer rollouts, rl-zoo's discounting for Pendulum (gamma 0.9, GAE 0.95), four minibatches, 64x64
# units. Stops at a greedy evaluation mean >= -250 over 100 seeded episodes (10 let a policy that
# scores -490 on other seeds pass).
def _merged(base: dict, changes: dict) -> dict:
    """A deep copy of ``base`` with the nested ``changes`` applied."""
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        merged[key] = (
            _merged(merged[key], value) if isinstance(value, dict) and key in merged else value
        )
    return merged


PENDULUM = _merged(
    CARTPOLE,
    dict(
        name="pendulum",
        env=dict(max_episode_steps=200),
        trainer=dict(
            num_envs=128, train_batch_size=128 * 16, num_episodes=1000, total_timesteps=600_000
        ),
        policy=dict(
            agent=dict(
                gamma=0.9,
                lr=0.001,
                gae_lambda=0.95,
                num_minibatches=4,
                model=dict(fc_dims=[64, 64]),
            )
        ),
        saving=dict(name="pendulum_ppo"),
        evaluation=dict(num_episodes=100, stop_value=-250.0),
    ),
)


def _seed_policy(lr: float) -> dict:
    """A policy block of the seed Tag config (the two teams differ in learning rate only)."""
    return dict(
        to_train=True,
        algorithm="A2C",
        gamma=0.98,
        lr=lr,
        model=dict(type="fully_connected", fc_dims=[256, 256], model_ckpt_filepath=""),
    )


# The seed run config of the original framework's Tag notebook, verbatim, plus evaluation settings.
TAG = dict(
    name="tag_continuous",
    env=seed_config(),
    trainer=dict(num_envs=50, train_batch_size=10000, num_episodes=500),
    policy=dict(runner=_seed_policy(lr=0.005), tagger=_seed_policy(lr=0.002)),
    saving=dict(
        metrics_log_freq=10,
        model_params_save_freq=5000,
        basedir="/tmp",
        name="continuous_tag",
        tag="example",
    ),
    evaluation=dict(eval_freq=50, num_episodes=10),
)

PRESETS = {"cartpole": CARTPOLE, "pendulum": PENDULUM, "tag": TAG}


def preset(name: str) -> dict:
    """A fresh copy of the preset ``name`` ("cartpole", "pendulum" or "tag")."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}")
    return copy.deepcopy(PRESETS[name])
