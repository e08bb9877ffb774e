"""The defaults mode of a run config (``defaults: warpdrive``): ``WARPDRIVE_DEFAULTS``, what
WarpDrive gives the keys a run config leaves out, in our schema; ``with_warpdrive_defaults`` fills
them in and ``read_warpdrive_keys`` reads (or refuses by name) WarpDrive's own keys.
``RunConfig`` calls both for such a config; the notebook's callbacks are in
:mod:`gpu_envs.lightning.warpdrive`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from gpu_envs.runs.errors import ConfigError
from gpu_envs.runs.presets import merged

# WarpDrive 1.6.5 (the version the Lightning notebook installs): its
# warp_drive/training/run_configs/default_configs.yaml, which its WarpDriveModule merges into a run
# config, then the behaviour of its trainer for the fields of ours that file has no key for
# (docs/tutorial-tag-lightning.md has the table, key by key). Its trainer's seed, when the config
# gives none, is the clock's: with_warpdrive_defaults draws it.
WARPDRIVE_DEFAULTS: dict[str, dict[str, Any]] = dict(
    trainer=dict(num_envs=10, num_episodes=10000, train_batch_size=10000),
    policy=dict(
        to_train=False,
        algorithm="A2C",
        vf_loss_coeff=0.01,
        entropy_coeff=0.05,
        clip_grad_norm=True,
        max_grad_norm=0.5,
        normalize_advantage=False,
        clip_param=0.01,
        gamma=0.98,
        lr=0.0001,
        gae_lambda=1.0,  # discounted returns bootstrapped at the rollout's end (no GAE)
        anneal_lr=False,  # a number is a constant learning rate
        update_epochs=1,  # one full-batch gradient step per iteration, PPO too
        num_minibatches=1,
        adam_eps=1e-8,  # torch.optim.Adam's own
        clip_vloss=False,
        model=dict(
            type="fully_connected",
            fc_dims=[64, 64],
            model_ckpt_filepath="",
            activation="relu",  # its FullyConnected model
            ortho_init=False,  # torch's default initialisation
        ),
    ),
    saving=dict(
        metrics_log_freq=100,
        model_params_save_freq=1000,
        basedir="experiments",  # WarpDrive's is /tmp: runs stay in the working directory
        name="default",
        tag="experiment",
        console="blocks",  # the metrics blocks it printed
    ),
)


def with_warpdrive_defaults(data: Mapping[str, Any]) -> dict:
    """``data`` (not changed) with every key of ``WARPDRIVE_DEFAULTS`` it leaves out filled in, in
    ``trainer``, ``saving`` and each policy, and ``trainer.seed``, when left out, drawn from the
    clock as WarpDrive does (``int(time.time())``). A section that is not a mapping is left for
    the schema to refuse."""
    sections = {
        "trainer": {**WARPDRIVE_DEFAULTS["trainer"], "seed": int(time.time())},
        "saving": WARPDRIVE_DEFAULTS["saving"],
    }
    filled = dict(data)
    for key, defaults in sections.items():
        given = filled.get(key, {})
        if isinstance(given, Mapping):
            filled[key] = merged(defaults, given)
    policies = filled.get("policy")
    if isinstance(policies, Mapping):
        filled["policy"] = {
            tag: merged(WARPDRIVE_DEFAULTS["policy"], given)
            if isinstance(given, Mapping)
            else given
            for tag, given in policies.items()
        }
    return filled


_SCHEDULED = ("lr", "vf_loss_coeff", "entropy_coeff")


def read_warpdrive_keys(data: Mapping[str, Any]) -> dict:
    """``data`` with WarpDrive's keys we do not have read into ours: ``trainer.num_gpus`` is
    ``trainer.devices``; ``normalize_return`` false is what we do (true is refused), and its
    ``[[timestep, value], ...]`` schedules are refused by name."""
    data = dict(data)
    trainer = data.get("trainer")
    if isinstance(trainer, Mapping) and "num_gpus" in trainer:
        trainer = dict(trainer)
        if "devices" in trainer:
            raise ConfigError("trainer.num_gpus: WarpDrive's name for trainer.devices; give one")
        trainer["devices"] = trainer.pop("num_gpus")
        data["trainer"] = trainer
    policies = data.get("policy")
    if not isinstance(policies, Mapping):
        return data
    data["policy"] = dict(policies)
    for tag, policy in policies.items():
        if not isinstance(policy, Mapping):
            continue
        for key in _SCHEDULED:
            value = policy.get(key)
            if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
                raise ConfigError(
                    f"policy.{tag}.{key}: must be a number; WarpDrive's [[timestep, value], ...] "
                    f"schedules are not supported (anneal_lr: true anneals the learning rate "
                    f"linearly to 0), got {value!r}"
                )
        if "normalize_return" in policy:
            policy = dict(policy)
            if policy.pop("normalize_return") is not False:
                raise ConfigError(
                    f"policy.{tag}.normalize_return: must be false (the returns are not "
                    "normalised; normalize_advantage normalises the advantages)"
                )
            data["policy"][tag] = policy
    return data
