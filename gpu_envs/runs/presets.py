"""Bundled run configs: ``cartpole``, ``pendulum``, ``acrobot``, ``mountaincar`` and
``mountaincar-continuous`` (tuned for fast CPU learning, each game's default preset, see
``gpu_envs.games``), ``tag`` (the seed config), ``tag-selfplay`` (both Tag teams learn, fast on
a CPU) and ``tag-quick`` (quick Tag's taggers learn against random runners in seconds). A game
registered outside the package (``gpu_envs.games.register_game``) without a preset of its own gets
``default_preset(game)``: PPO for one agent, named after the game.

Each preset is plain data in the ``RunConfig`` shape; ``preset(name)`` returns a fresh deep copy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from gpu_envs.games import GAMES, Game, game
from gpu_envs.games.tag.quick import QUICK_TAG
from gpu_envs.games.tag.seed import seed_config

# Tuned for wall-clock on a small CPU, where every torch call costs microseconds whatever its size:
# many envs with short rollouts (few step calls per sample), one full-batch minibatch (10 optimiser
# steps per 512 samples), one hidden layer of 64 tanh units (a third fewer calls per gradient step
# than 64x64, and it needs fewer samples: docs/benchmarks-trainers.md), and SB3 rl-zoo's discounting
# (gamma 0.98, GAE lambda 0.8). On one process the gradient step is the analytic one
# (trainers/analytic_step.py: the loss's gradient and Adam in a few dozen torch calls, nothing to
# compile); compile=True applies only where it does not (several processes, another optimizer).
# Stops at CartPole-v1's reward threshold (475, greedy evaluation every 2 iterations).
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
    saving=dict(metrics_log_freq=10, model_params_save_freq=100, name="cartpole_ppo"),
    evaluation=dict(eval_freq=2, num_episodes=100, stop_value=GAMES["cartpole"].solved_threshold),
)


# Pendulum-v1 with the Gaussian head, CARTPOLE's recipe with Pendulum's numbers: more envs and
# longer rollouts, gamma 0.9 and GAE lambda 0.9, eight minibatches, 64x64 units, lr 1e-3 annealed
# over 1.2M env steps (lr 2e-3, GAE 0.95 and four minibatches peak near -270 to -290 on the fixed
# evaluation episodes; these settings reach -250 at 86k-414k env steps on seeds 1-3). Stops at a
# greedy evaluation mean >= -250 over 100 seeded episodes, the same 100 at
# every evaluation (those of `gpu-envs evaluate pendulum CKPT`), evaluated every iteration
# (evaluations are outside the training clock): docs/training-pendulum.md.
def merged(base: dict, changes: Mapping) -> dict:
    """A deep copy of ``base`` with the nested ``changes`` applied."""
    result = copy.deepcopy(base)
    for key, value in changes.items():
        result[key] = (
            merged(result[key], value)
            if isinstance(value, Mapping) and isinstance(result.get(key), dict)
            else copy.deepcopy(value)
        )
    return result


PENDULUM = merged(
    CARTPOLE,
    dict(
        name="pendulum",
        env=dict(max_episode_steps=200),
        trainer=dict(
            num_envs=128, train_batch_size=128 * 16, num_episodes=1000, total_timesteps=1_200_000
        ),
        policy=dict(
            agent=dict(
                gamma=0.9,
                lr=0.001,
                gae_lambda=0.9,
                num_minibatches=8,
                model=dict(fc_dims=[64, 64]),
            )
        ),
        saving=dict(name="pendulum_ppo"),
        evaluation=dict(
            eval_freq=1, num_episodes=100, stop_value=GAMES["pendulum"].solved_threshold
        ),
    ),
)

# Acrobot-v1: rl-baselines3-zoo's PPO discounting (gamma 0.99, GAE lambda 0.94) on CARTPOLE's
# small-CPU recipe: 64 envs x 16 steps, 10 epochs of 4 minibatches (many gradient steps per sample),
# 64x64 units, an entropy bonus of 0.01 (the rare early successes need exploration). Stops at the
# reward threshold (-100, greedy, 100 seeded episodes every 5 iterations): docs/acrobot.md.
ACROBOT = merged(
    CARTPOLE,
    dict(
        name="acrobot",
        env=dict(max_episode_steps=500),
        trainer=dict(num_envs=64, train_batch_size=64 * 16, total_timesteps=1_000_000),
        policy=dict(
            agent=dict(
                gamma=0.99,
                lr=0.001,
                gae_lambda=0.94,
                entropy_coeff=0.01,
                update_epochs=10,
                num_minibatches=4,
                model=dict(fc_dims=[64, 64]),
            )
        ),
        saving=dict(name="acrobot_ppo"),
        evaluation=dict(eval_freq=5, stop_value=GAMES["acrobot"].solved_threshold),
    ),
)

# MountainCar-v0 (sparse reward: -1 per step until the flag): rl-baselines3-zoo's PPO settings,
# many short rollouts (16 envs x 16 steps), gamma 0.99, GAE lambda 0.98, 4 epochs of 4 minibatches
# (64 samples, SB3's), an entropy bonus of 0.05, lr 3e-4 constant; the observations are standardised
# by the game face (``observation_scale`` in gpu_envs.games). Exploration alone never reaches the
# flag, so PPO learns from rewards shaped by the car's mechanical energy (``trainer.reward_shaping``
# 30, potential-based: the optimal policy is unchanged; returns and evaluations stay the env's).
# Stops at the reward threshold (-110): docs/mountain-car.md.
MOUNTAINCAR = merged(
    ACROBOT,
    dict(
        name="mountaincar",
        env=dict(max_episode_steps=200),
        trainer=dict(
            num_envs=16, train_batch_size=16 * 16, total_timesteps=1_000_000, reward_shaping=30.0
        ),
        policy=dict(
            agent=dict(
                lr=0.0003,
                gae_lambda=0.98,
                entropy_coeff=0.05,
                update_epochs=4,
                num_minibatches=4,
                anneal_lr=False,
            )
        ),
        saving=dict(name="mountaincar_ppo"),
        evaluation=dict(eval_freq=20, stop_value=GAMES["mountaincar"].solved_threshold),
    ),
)

# MountainCarContinuous-v0: MOUNTAINCAR's rollouts with the Gaussian head (initial std 1 over the
# force range [-1, 1]: wide exploration), gamma 0.9999 as rl-baselines3-zoo, a small entropy bonus,
# no reward shaping (its exploration finds the flag).
# Stops at the reward threshold (90): docs/mountain-car.md.
MOUNTAINCAR_CONTINUOUS = merged(
    MOUNTAINCAR,
    dict(
        name="mountaincar-continuous",
        env=dict(max_episode_steps=999),
        trainer=dict(reward_shaping=0.0),
        policy=dict(agent=dict(gamma=0.9999, gae_lambda=0.9, entropy_coeff=0.005)),
        saving=dict(name="mountaincar_continuous_ppo"),
        evaluation=dict(stop_value=GAMES["mountaincar-continuous"].solved_threshold),
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


# The seed run config of the original framework's Tag notebook, plus evaluation settings; its
# experiment folder goes under ./experiments like every preset's (the notebook's is /tmp).
TAG = dict(
    name="tag_continuous",
    env=seed_config(),
    trainer=dict(num_envs=50, train_batch_size=10000, num_episodes=500),
    policy=dict(runner=_seed_policy(lr=0.005), tagger=_seed_policy(lr=0.002)),
    saving=dict(metrics_log_freq=10, model_params_save_freq=5000, name="tag_a2c"),
    evaluation=dict(eval_freq=50, num_episodes=10),
)

# Self-play Tag that learns within 20 minutes on a 2-core CPU (docs/training-tag-selfplay.md): the
# seed game with PPO and 64x64 networks (the seed's 256x256 costs ~5x more per sample), short
# rollouts (40 steps of 48 games), 8 minibatches, 8 epochs for the taggers (5 agents per game, few
# samples) and 2 for the runners, one torch thread (the run is reproducible), and most games
# against a frozen opponent (``opponents``): 19 games with frozen taggers, 19 with frozen runners,
# each drawn from the team's initial weights only (near-uniform actions), 10 games of self-play.
# Without them, plain self-play forgets the random opponents: its runners learn to flee chasing
# taggers and stay as easy to tag as random runners for random taggers.
TAG_SELFPLAY = merged(
    TAG,
    dict(
        trainer=dict(
            num_envs=48,
            train_batch_size=48 * 40,
            total_timesteps=48 * 40 * 400,
            seed=1,
            accelerator="cpu",
            torch_threads=1,
        ),
        policy={
            team: dict(
                algorithm="PPO",
                lr=0.001,
                update_epochs=epochs,
                num_minibatches=8,
                entropy_coeff=entropy,
                model=dict(fc_dims=[64, 64]),
            )
            for team, epochs, entropy in (("runner", 2, 0.001), ("tagger", 8, 0.01))
        },
        saving=dict(model_params_save_freq=50, name="tag_selfplay_ppo"),
        evaluation=dict(eval_freq=0),
        opponents=dict(share=0.8, pool_size=0),
    ),
)

# Quick Tag (gpu_envs/games/tag/quick.py, docs/tag-quick.md): only the taggers learn (PPO, 64x64,
# lr 0.005, 8 epochs of 4 minibatches), against runners frozen at their initial weights
# (near-uniform actions: random runners), so the training curve is the taggers' score against
# random runners; 16 games x 25 steps (one episode) per rollout, 24k env steps (~10-25 s here).
TAG_QUICK = {
    **merged(
        TAG_SELFPLAY,
        dict(
            trainer=dict(num_envs=16, train_batch_size=16 * 25, total_timesteps=24_000),
            policy=dict(runner=dict(to_train=False), tagger=dict(lr=0.005, num_minibatches=4)),
            saving=dict(model_params_save_freq=20, name="tag_quick_ppo"),
            opponents=dict(share=0.0),
        ),
    ),
    "env": dict(QUICK_TAG),
}

PRESETS = {
    "cartpole": CARTPOLE,
    "pendulum": PENDULUM,
    "acrobot": ACROBOT,
    "mountaincar": MOUNTAINCAR,
    "mountaincar-continuous": MOUNTAINCAR_CONTINUOUS,
    "tag": TAG,
    "tag-selfplay": TAG_SELFPLAY,
    "tag-quick": TAG_QUICK,
}


def default_preset(record: Game) -> dict:
    """The run config of a single-agent game that has no preset (a registered one): PPO with
    CARTPOLE's small-CPU rollouts (64 envs x 16 steps), CleanRL's discounting (gamma 0.99, GAE
    lambda 0.95) and entropy bonus (0.01 for a discrete action, none for a continuous one), 10
    epochs of 4 minibatches, 64x64 tanh units, lr 1e-3 annealed over 200k env steps, the env's own
    keyword defaults, a greedy evaluation every 5 iterations stopping at the game's
    ``solved_threshold`` (none: the run goes on to its last step).
    Override any field as for a preset (``trainer.total_timesteps=...``)."""
    if record.trainer_face not in ("discrete", "continuous"):
        raise KeyError(
            f"game {record.name!r} (trainer_face {record.trainer_face!r}) has no default preset: "
            "give a run config (--config FILE)"
        )
    config = merged(
        CARTPOLE,
        dict(
            name=record.name,
            trainer=dict(num_envs=64, train_batch_size=64 * 16, total_timesteps=200_000),
            policy=dict(
                agent=dict(
                    gamma=0.99,
                    lr=0.001,
                    gae_lambda=0.95,
                    entropy_coeff=0.01 if record.trainer_face == "discrete" else 0.0,
                    update_epochs=10,
                    num_minibatches=4,
                    model=dict(fc_dims=[64, 64]),
                )
            ),
            saving=dict(name=f"{record.name}_ppo"),
            evaluation=dict(eval_freq=5, stop_value=record.solved_threshold),
        ),
    )
    config["env"] = {}
    return config


def preset(name: str) -> dict:
    """A fresh copy of the preset ``name`` (a key of :data:`PRESETS`); for any other name of a
    game (an alias, an env id, a registered game's name), that game's preset, or its
    :func:`default_preset` when it has none."""
    if name in PRESETS:
        return copy.deepcopy(PRESETS[name])
    try:
        record = game(name)
    except KeyError:
        raise KeyError(
            f"unknown preset {name!r}; available: {', '.join(PRESETS)}, or the name of a "
            "registered game (gpu_envs.games.register_game)"
        ) from None
    return preset(record.preset) if record.preset in PRESETS else default_preset(record)
