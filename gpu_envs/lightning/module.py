"""Lightning's ``Trainer`` over Tag: the flow of the original GPU framework's Lightning notebook.

``TagLightningModule`` plays the role of ``WarpDriveModule``; ``EnvResetCallback`` resets the envs
when training starts. The notebook's callback names, ``CUDACallback`` and ``PerfStatsCallback``,
are in ``gpu_envs.lightning.warpdrive``::

    env = gpu_envs.TagEnv(num_envs=run_config["trainer"]["num_envs"], device="cuda",
                          **run_config["env"])
    policy_tag_to_agent_id_map = {"tagger": list(env.taggers), "runner": list(env.runners)}
    module = TagLightningModule(env=env, config=run_config,
                                policy_tag_to_agent_id_map=policy_tag_to_agent_id_map)
    module.animate("before.gif", fps=25)
    perf_stats = PerfStatsCallback(batch_size=module.training_batch_size,
                                   num_iters=module.num_iters, log_freq=10)
    trainer = lightning.pytorch.Trainer(accelerator="gpu", devices=1,
                                        callbacks=[CUDACallback(module=module), perf_stats],
                                        max_epochs=num_episodes * episode_length / train_batch_size,
                                        log_every_n_steps=1, reload_dataloaders_every_n_epochs=1)
    trainer.fit(module)
    module.animate("after.gif", fps=25)
    module.graceful_close()

A plain dict config is read as WarpDriveModule read it: the keys it leaves out take WarpDrive's
defaults (``RunConfig`` with ``defaults: warpdrive``, unless the dict says otherwise).

A thin adapter of the training core (``core.TrainingRun``, what ``gpu-envs train`` drives too):
one epoch is one ``TrainingRun.iterate`` (rollout, every policy's PPO or A2C update through
Lightning's manual optimisation, evaluation, logs and checkpoints when due); the dataloader yields
a single placeholder item. Every scalars point also goes to ``self.log`` under CleanRL's names and
the notebook's (``<policy>/<name>``); the metric blocks print every ``saving.metrics_log_freq``
iterations (``verbose``); the experiment folder ``<saving.basedir>/<saving.name>/<saving.tag>``
is the Fabric trainer's. One device (``devices=1``), 32-bit precision; for several GPUs use the
Fabric trainer (``gpu_envs.trainers.fabric_loop``).

Building the module silences Lightning's install tips and the deprecation warning its loops raise
from torch (``console.hush_third_party``); importing it changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.fabric.utilities.rank_zero import rank_zero_info
from torch.utils.data import DataLoader

from gpu_envs.games.tag.env import TagEnv
from gpu_envs.games.tag.rendering import animate_episode, save_animation
from gpu_envs.runs import console
from gpu_envs.runs.config import ConfigError, RunConfig
from gpu_envs.trainers.core import REACHED, TrainingRun
from gpu_envs.trainers.game_faces import TagGame
from gpu_envs.trainers.policy import greedy_actions
from gpu_envs.trainers.rollout import Collector
from gpu_envs.trainers.sampling import TorchSampler
from gpu_envs.trainers.seeding import NUMPY_SEEDS, seed_everything


def _check_agent_map(agent_map: dict[str, list[int]], tags: list[str], num_agents: int) -> None:
    """Every policy of the config has agents, every id is an agent's, and every agent has exactly
    one policy."""
    if set(agent_map) != set(tags):
        raise ValueError(
            f"policy_tag_to_agent_id_map names policies {sorted(agent_map)}, "
            f"the config's policy section {sorted(tags)}"
        )
    owners: dict[int, str] = {}
    for tag, ids in agent_map.items():
        if not ids:
            raise ValueError(f"policy_tag_to_agent_id_map[{tag!r}]: no agent ids")
        bad = [
            i
            for i in ids
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < num_agents
        ]
        if bad:
            raise ValueError(
                f"policy_tag_to_agent_id_map[{tag!r}]: ids {bad[:8]} are not agent ids "
                f"0..{num_agents - 1}"
            )
        if len(set(ids)) != len(ids):
            raise ValueError(f"policy_tag_to_agent_id_map[{tag!r}]: repeated agent ids")
        for i in ids:
            if i in owners:
                raise ValueError(
                    f"policy_tag_to_agent_id_map: agent {i} is in both {owners[i]!r} and {tag!r}"
                )
            owners[i] = tag
    missing = sorted(set(range(num_agents)) - set(owners))
    if missing:
        raise ValueError(f"policy_tag_to_agent_id_map: agents {missing[:8]} have no policy")


class TagLightningModule(pl.LightningModule):
    """The env and one actor-critic per policy, trained by Lightning's ``Trainer`` (one epoch =
    one iteration of ``core.TrainingRun``).

    Args:
        env: the batched ``gpu_envs.TagEnv`` (NEXT_STEP autoreset); its device is where rollouts and
            training run, so give the ``Trainer`` the matching accelerator. The module owns it from
            now on: ``close()`` releases it.
        config: the run config: a ``RunConfig``, or a plain dict (the notebook's ``run_config``)
            whose left-out keys take WarpDrive's defaults unless it names its ``defaults``.
        policy_tag_to_agent_id_map: policy name -> agent ids; None maps ``tagger``/``runner`` to the
            teams (or one policy to every agent).
        verbose: print the seed, the per-policy metric blocks every ``saving.metrics_log_freq``
            iterations and where the experiment folder and checkpoints are written.
    """

    def __init__(
        self,
        env: TagEnv,
        config: RunConfig | Mapping[str, Any],
        policy_tag_to_agent_id_map: dict[str, list[int]] | None = None,
        verbose: bool = True,
    ):
        super().__init__()
        self.automatic_optimization = False
        self.run_config = (
            config
            if isinstance(config, RunConfig)
            else RunConfig.from_dict({"defaults": "warpdrive", **config})
        )
        if self.run_config.game != "tag":
            raise ConfigError(f"name: TagLightningModule trains Tag, got {self.run_config.name!r}")
        if not isinstance(env, TagEnv):
            raise TypeError(f"env must be a gpu_envs.TagEnv, got {type(env).__name__}")
        tc = self.run_config.trainer
        game = TagGame(env)
        if game.num_envs != tc.num_envs:
            raise ConfigError(
                f"trainer.num_envs is {tc.num_envs} but the env runs {game.num_envs} games"
            )
        tags = list(self.run_config.policy)
        agent_map = policy_tag_to_agent_id_map or game.default_agent_map(tags)
        _check_agent_map(agent_map, tags, game.num_agents)
        self.verbose = verbose
        console.hush_third_party()  # Lightning's install tips, before the user's Trainer says them
        seed_everything(tc.seed)
        if verbose:  # (Lightning's own line, on rank 0, as its seed_everything says it)
            rank_zero_info(f"Seed set to {tc.seed % NUMPY_SEEDS}")
        self.run = TrainingRun(
            self.run_config,
            env.device,
            game=game,
            agent_map=agent_map,
            log_scalars=self._log_to_lightning,
        )
        self.run.say = self.print if verbose else _silent
        self.run.console = "blocks" if verbose else "none"
        self.run.speed_in_blocks = False  # PerfStatsCallback prints the speed block
        self.policies = torch.nn.ModuleDict({g.tag: g.module for g in self.run.groups})
        self._closed = False
        self._why: str | None = None

    # ------------------------------------------------------------------------------ the run's state
    @property
    def groups(self):
        return self.run.groups

    @property
    def game(self):
        return self.run.game

    @property
    def collector(self) -> Collector | None:
        """The rollout (None once closed)."""
        return None if self._closed else self.run.collector

    @property
    def iteration(self) -> int:
        return self.run.iteration

    @property
    def env_step(self) -> int:
        return self.run.env_step

    @property
    def num_iterations(self) -> int:
        return self.run.num_iterations

    @property
    def training_batch_size(self) -> int:
        """Env steps per iteration (the notebook's ``wd_module.training_batch_size``)."""
        return self.run.steps_per_iteration

    @property
    def num_iters(self) -> int:
        """Iterations of the run (the notebook's ``wd_module.num_iters``)."""
        return self.run.num_iterations

    # ------------------------------------------------------------------------------ Lightning hooks
    def configure_optimizers(self):
        """The run's Adam of every trained policy, in the config's policy order."""
        optimizers = [g.optimizer for g in self.run.groups if g.optimizer is not None]
        return optimizers or None

    def train_dataloader(self) -> DataLoader:
        """One placeholder item: each epoch is one training step, which collects its own rollout.
        Its own generator: a loader's iterator draws a seed, which must not come from the run's
        torch RNG (training draws the same numbers as under ``gpu-envs train``)."""
        return DataLoader([0], batch_size=1, generator=torch.Generator())

    def on_fit_start(self) -> None:
        """Check the ``Trainer`` (one device, 32-bit, the env's device, whole epochs), then open
        the experiment folder."""
        trainer = self.trainer
        if trainer.world_size != 1:
            raise RuntimeError(
                f"TagLightningModule trains on one device (got world size {trainer.world_size}); "
                "use the Fabric trainer (gpu_envs.trainers.fabric_loop) for several devices"
            )
        if trainer.precision not in ("32-true", "32"):
            raise RuntimeError(
                "TagLightningModule trains in 32-bit precision, "
                f"got precision={trainer.precision!r}"
            )
        max_epochs = trainer.fit_loop.max_epochs
        if isinstance(max_epochs, float):  # the notebook's num_episodes * episode_length / batch
            if not max_epochs.is_integer():
                raise ValueError(
                    f"max_epochs={max_epochs} is not a whole number of iterations; "
                    "use num_episodes * episode_length // train_batch_size"
                )
            trainer.fit_loop.max_epochs = int(max_epochs)
        env_device = self.game.env.device
        if self.device.type != env_device.type or (self.device.index or 0) != (
            env_device.index or 0
        ):
            raise RuntimeError(
                f"the Trainer put the policies on {self.device} but the env runs on {env_device}: "
                "build the env on the Trainer's device (accelerator='cpu' with device='cpu', "
                "accelerator='gpu' with device='cuda')"
            )
        if self.run.experiment.root is None:
            self.run.open_folder()
            self._say(f"Saving the experiment to the folder '{self.run.root}'")

    def reset_envs(self) -> None:
        """Choose every policy's gradient step (compiled with ``trainer.compile``), compile the
        env's and the sampler's kernels, and reset every env (env i gets seed + i)."""
        self._live_collector()
        self.run.compile_steps(self.manual_backward)
        self.run.start()

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        """One iteration of the run: a rollout on the device, every trained policy's PPO/A2C
        update, and what is due (evaluation, logs, checkpoint)."""
        del batch, batch_idx
        if self._live_collector().obs is None:
            raise RuntimeError(
                "the envs were never reset: add CUDACallback(module=...) (or EnvResetCallback()) "
                "to the Trainer's callbacks"
            )
        self._why = self.run.iterate(last=self._ends_here())
        if self._why == REACHED:
            self.trainer.should_stop = True

    def on_train_end(self) -> None:
        """The folder closed (every logged value on disk), its status and curves written."""
        if self.run.experiment.root is None:
            return
        self.run.experiment.close()
        if self._why is not None:  # else the run stopped in an error
            self.run.finish(self._why)

    def _ends_here(self) -> bool:
        """The iteration about to run is the run's last: the config's or the ``Trainer``'s
        ``max_epochs``."""
        trainer = self.trainer
        last_epoch = (
            trainer.max_epochs is not None and trainer.current_epoch + 1 >= trainer.max_epochs
        )
        return self.iteration + 1 >= self.num_iterations or last_epoch

    def _log_to_lightning(self, metrics: dict, step: int, records: list) -> None:
        """A scalars point of the run to ``self.log``: CleanRL's names, and for the iterations'
        ``records`` the notebook's blocks (``<policy>/<name>``; a None, no episode ended, left
        out)."""
        values = dict(metrics)
        if records:
            heads = len(self.game.action_nvec)
            for group in self.groups:
                block = console.policy_block(group, records, heads)
                values.update({f"{group.tag}/{k}": v for k, v in block.items() if v is not None})
        self.log_dict(values, on_step=True, on_epoch=False, batch_size=1)

    def _say(self, message: str) -> None:
        if self.verbose:
            self.print(f"[{self.game.env.device}]: {message}")

    def _live_collector(self) -> Collector:
        if self._closed:
            raise RuntimeError("TagLightningModule was closed; build a new module to train again")
        return self.run.collector

    # ------------------------------------------------------------------------------ episodes
    @torch.no_grad()
    def fetch_episode_states(self, seed: int = 0, greedy: bool = False) -> dict[str, Any]:
        """One game played by the policies as they are now, each for its agents
        (``TagEnv.fetch_episode_states``'s trajectory, in a private one-game env).

        Actions are drawn from the policies (``greedy``: their most probable); ``seed`` seeds the
        start state and the draws, inside ``torch.random.fork_rng``: training's random state is
        not touched.
        """
        env, nvec, sampler = self.game.env, self.game.action_nvec, TorchSampler()

        def policy(obs: torch.Tensor, episode_env: Any) -> torch.Tensor:
            actions = torch.empty((*obs.shape[:2], len(nvec)), dtype=torch.int64, device=obs.device)
            for group in self.groups:
                network = self.policies[group.tag]
                agents_obs = obs[:, group.agents]
                flat = agents_obs.reshape(-1, agents_obs.shape[-1])
                logits, _ = network(flat.to(next(network.parameters()).device))
                chosen = greedy_actions(logits, nvec) if greedy else sampler(logits, nvec)
                actions[:, group.agents] = chosen.view(*agents_obs.shape[:2], -1).to(obs.device)
            return actions

        cuda = [env.device.index or 0] if env.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            return env.fetch_episode_states(policy, seed=seed)

    def animate(
        self,
        path: str | Path | None = None,
        *,
        fps: float = 25.0,
        seed: int = 0,
        greedy: bool = False,
        size: int = 480,
    ) -> list[np.ndarray]:
        """The frames of one game played by the policies as they are now (the notebook's
        ``generate_tag_env_rollout_animation(wd_module, fps=25)``), written to ``path`` (``.gif``,
        or ``.mp4`` with ``imageio-ffmpeg``) when given.

        Before training the policies play as initialised; after, as trained. Taggers are pink,
        runners blue, tagged runners grey (``gpu_envs.games.tag.rendering``).
        """
        frames = animate_episode(self.fetch_episode_states(seed=seed, greedy=greedy), size=size)
        if path is not None:
            save_animation(frames, path, fps=fps)
        return frames

    # ------------------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Release the env's buffers and the rollout buffers (and CUDA's cached blocks), and close
        the experiment folder's logs."""
        if self._closed:
            return
        self._closed = True
        self.game.close()
        for group in self.groups:
            group.optimizer = group.step = None
        self.run.experiment.close()
        if self.game.env.device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"[{self.game.env.device}]: Trainer exits gracefully", flush=True)

    def graceful_close(self) -> None:
        """``close()``, under the notebook's name (``wd_module.graceful_close()``)."""
        self.close()


def _silent(text: str) -> None:
    """What a quiet module prints."""


class EnvResetCallback(pl.Callback):
    """Resets the envs on their device when training starts, and says when it ended (the
    notebook's ``CUDACallback``, which is this class: on the CPU it resets the CPU envs).

    Args:
        module: the module the ``Trainer`` fits (the notebook's ``CUDACallback(module=wd_module)``);
            None: whichever it fits.
    """

    def __init__(self, module: TagLightningModule | None = None):
        self.module = module

    def on_train_start(self, trainer: pl.Trainer, pl_module: TagLightningModule) -> None:
        if self.module is not None and self.module is not pl_module:
            raise ValueError(
                f"{type(self).__name__}(module=...) was given another module than the one the "
                "Trainer fits"
            )
        pl_module.reset_envs()

    def on_train_end(self, trainer: pl.Trainer, pl_module: TagLightningModule) -> None:
        pl_module.print("Training is complete!")
