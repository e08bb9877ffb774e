"""Lightning's ``Trainer`` over Tag: the flow of the original GPU framework's Lightning notebook.

``TagLightningModule`` plays the role of ``WarpDriveModule``; ``CUDACallback`` (also named
``EnvResetCallback``) and ``PerfStatsCallback`` keep the notebook's names and arguments::

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

One epoch is one training iteration: the dataloader yields a single placeholder item, and
``training_step`` runs the Fabric trainer's iteration with the same pieces: the rollout
(``rollout.Collector``), then ``learner.learn`` (every policy's PPO or A2C update, with its own
optimizer through Lightning's manual optimisation, and the divergence check). Per-policy metrics go
to ``self.log`` under the notebook's names (``<policy>/<name>``) and CleanRL's
(``metrics.cleanrl_metrics``) every iteration. Every ``saving.metrics_log_freq`` iterations they
are printed as the notebook's blocks and written to the experiment folder
``<saving.basedir>/<saving.name>/<saving.tag>`` (the Fabric trainer's layout:
``experiment.Experiment``), which also gets a checkpoint every ``saving.model_params_save_freq``
iterations and at the last. One device (``devices=1``), 32-bit precision; for several GPUs use
the Fabric trainer (``gpu_envs.trainers.fabric_loop``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader

from gpu_envs.tag import TagEnv
from gpu_envs.tag_rendering import animate_episode, save_animation
from gpu_envs.trainers import checkpoint as ckpt
from gpu_envs.trainers import console, learner
from gpu_envs.trainers.config import ConfigError, RunConfig
from gpu_envs.trainers.experiment import Experiment, experiment_root, fresh_root
from gpu_envs.trainers.games import TagGame
from gpu_envs.trainers.metrics import IterationRecord, MetricsWindow, cleanrl_metrics
from gpu_envs.trainers.opponents import make_pool
from gpu_envs.trainers.policy import greedy_actions, make_network
from gpu_envs.trainers.rollout import Collector, PolicyGroup, agent_index
from gpu_envs.trainers.sampling import TorchSampler, make_sampler
from gpu_envs.trainers.timing import PhaseTimer


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
    one iteration).

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
        self.game = TagGame(env)
        if self.game.num_envs != tc.num_envs:
            raise ConfigError(
                f"trainer.num_envs is {tc.num_envs} but the env runs {self.game.num_envs} games"
            )
        tags = list(self.run_config.policy)
        agent_map = policy_tag_to_agent_id_map or self.game.default_agent_map(tags)
        _check_agent_map(agent_map, tags, self.game.num_agents)
        self.verbose = verbose

        pl.seed_everything(tc.seed, verbose=verbose)
        nvec = self.game.action_nvec
        self.policies = torch.nn.ModuleDict(
            {
                tag: make_network(self.game.obs_dim, nvec, self.run_config.policy[tag], tag)
                for tag in tags
            }
        )
        self.groups = [
            PolicyGroup(
                tag,
                self.run_config.policy[tag],
                self.policies[tag],
                self.policies[tag],
                None,  # Lightning makes the optimizers: attached when training starts
                agent_index(list(agent_map[tag]), env.device),
                len(agent_map[tag]),
            )
            for tag in tags
        ]
        self.timer = PhaseTimer(env.device)
        self.sampler = make_sampler(tc.action_sampler, tc.seed, env.device)
        self.collector: Collector | None = Collector(
            self.game,
            self.groups,
            tc.num_steps,
            self.sampler,
            self.timer,
            make_pool(self.groups, self.run_config.opponents, tc.num_envs, tc.seed),
        )
        self.window = MetricsWindow(tags, len(nvec))

        self.steps_per_iteration = tc.num_steps * tc.num_envs
        total = tc.total_timesteps or tc.num_episodes * self.game.episode_length
        self.num_iterations = max(1, total // self.steps_per_iteration)
        self.iteration = 0
        self.env_step = 0
        self.total_episodes = 0
        self.last_record: IterationRecord | None = None
        self.last_phase_ms: dict[str, float] = {}
        self.experiment: Experiment | None = None
        self._unprinted: list[IterationRecord] = []
        self._speed = console.SpeedWindow()
        self._train_start: float | None = None

    @property
    def training_batch_size(self) -> int:
        """Env steps per iteration (the notebook's ``wd_module.training_batch_size``)."""
        return self.steps_per_iteration

    @property
    def num_iters(self) -> int:
        """Iterations of the run (the notebook's ``wd_module.num_iters``)."""
        return self.num_iterations

    # ------------------------------------------------------------------------------ Lightning hooks
    def configure_optimizers(self):
        """One Adam per trained policy, in the config's policy order (frozen policies have none)."""
        optimizers = [
            learner.make_optimizer(self.policies[g.tag], g.config, self.device)
            for g in self.groups
            if g.config.to_train
        ]
        return optimizers or None

    def train_dataloader(self) -> DataLoader:
        """One placeholder item: each epoch is one training step, which collects its own rollout."""
        return DataLoader([0], batch_size=1)

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
        if self.experiment is None:
            self.experiment = Experiment(
                fresh_root(experiment_root(self.run_config)), self.run_config
            )
            self.experiment.log_models({g.tag: g.module for g in self.groups})
            self._say(f"Saving the experiment to the folder '{self.experiment.root}'")

    def reset_envs(self) -> None:
        """Attach Lightning's optimizers and choose every policy's gradient step (compiled with
        ``trainer.compile``), compile the env's and the sampler's kernels, and reset every env
        (env i gets seed + i)."""
        collector = self._live_collector()
        trained = [g for g in self.groups if g.config.to_train]
        optimizers = self.optimizers() if trained else []
        optimizers = optimizers if isinstance(optimizers, list) else [optimizers]
        for group, optimizer in zip(trained, optimizers, strict=True):
            group.optimizer = optimizer
        tc = self.run_config.trainer
        learner.make_steps(
            self.groups, self.manual_backward, collector.buffers, self.game.action_nvec, tc.compile
        )
        collector.warm_up()
        collector.reset(tc.seed)
        self._train_start = time.perf_counter()

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        """One iteration: a rollout on the device, then every trained policy's PPO/A2C update;
        the metrics, and when due the folder's logs and a checkpoint."""
        del batch, batch_idx
        collector = self._live_collector()
        if collector.obs is None:
            raise RuntimeError(
                "the envs were never reset: add CUDACallback(module=...) (or EnvResetCallback()) "
                "to the Trainer's callbacks"
            )
        self._speed.begin()
        self.timer.reset()
        self.iteration += 1
        rollout = collector.collect()
        with self.timer.phase("training"):
            stats = learner.learn(self.groups, rollout, self.iteration, self.num_iterations)
        self.env_step += self.steps_per_iteration
        self.window.add(self.iteration, self.env_step, stats, collector)
        (record,) = self.window.flush()  # the iteration's one device-to-host read
        self.last_record, self.last_phase_ms = record, self.timer.totals_ms()
        self.total_episodes += int(next(iter(record.policies.values()))["episode_count"])
        self._speed.add(self.last_phase_ms, _agent_steps(record))
        self._log_iteration(record)
        if self.log_due():
            self._log_window()
        if (
            self.iteration % self.run_config.saving.model_params_save_freq == 0
            or self.is_last_iteration()
        ):
            self._write_checkpoint()

    def on_train_end(self) -> None:
        """Every logged value of the folder on disk."""
        if self.experiment is not None:
            self.experiment.flush()

    def log_due(self) -> bool:
        """Whether this iteration prints and writes the folder's logs: every
        ``saving.metrics_log_freq`` iterations and the last one."""
        return (
            self.iteration % self.run_config.saving.metrics_log_freq == 0
            or self.is_last_iteration()
        )

    def is_last_iteration(self) -> bool:
        """This iteration is the run's last: the config's or the ``Trainer``'s ``max_epochs``."""
        trainer = self.trainer
        last_epoch = (
            trainer.max_epochs is not None and trainer.current_epoch + 1 >= trainer.max_epochs
        )
        return self.iteration == self.num_iterations or last_epoch

    def _log_iteration(self, record: IterationRecord) -> None:
        """``self.log`` every policy's metrics of this iteration (the blocks' names and CleanRL's);
        a block's None (no episode ended) is left out."""
        self._unprinted.append(record)
        heads = len(self.game.action_nvec)
        values = cleanrl_metrics([record], [g.tag for g in self.groups])
        for group in self.groups:
            block = console.policy_block(group, [record], heads)
            values.update({f"{group.tag}/{name}": v for name, v in block.items() if v is not None})
        self.log_dict(values, on_step=True, on_epoch=False, batch_size=1)

    def _log_window(self) -> None:
        """The iterations since the last log point: the notebook's blocks (printed when
        ``verbose``), the folder's logs and results.json, its TensorBoard and CSV loggers."""
        records, self._unprinted = self._unprinted, []
        heads = len(self.game.action_nvec)
        blocks = {g.tag: console.policy_block(g, records, heads) for g in self.groups}
        if self.verbose:
            self.print(
                "\n".join(
                    console.format_block(f"Metrics for policy '{tag}'", block)
                    for tag, block in blocks.items()
                )
            )
        experiment = self.experiment
        assert experiment is not None, "on_fit_start opens the folder"
        collect_seconds = self._speed.collect_seconds()
        speed = self._speed.block(self.iteration, self.num_iterations, self.steps_per_iteration)
        experiment.log_window(
            records,
            blocks,
            speed,
            self.steps_per_iteration * len(records),
            collect_seconds=collect_seconds,
            total_episodes=self.total_episodes,
            train_seconds=self._train_seconds(),
        )
        metrics = cleanrl_metrics(records, [g.tag for g in self.groups])
        metrics["charts/SPS"] = speed["Mean env-steps per sec (total)"]
        for logger in experiment.loggers:
            logger.log_metrics(metrics, step=self.env_step)
        self._say(f"Saving the results to the file '{experiment.root / 'results.json'}'")

    def _train_seconds(self) -> float:
        return 0.0 if self._train_start is None else time.perf_counter() - self._train_start

    def _write_checkpoint(self) -> None:
        """``ckpt/iteration_<N>.pth.tar`` in the folder, in the Fabric trainer's format (so
        ``gpu-envs evaluate|render tag`` and ``load_policy`` read it)."""
        experiment = self.experiment
        assert experiment is not None, "on_fit_start opens the folder"
        experiment.flush()  # the logs on disk reach at least as far as the checkpoint
        rng = {"torch": torch.get_rng_state()}
        if self.game.env.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.game.env.device)
        counters = {
            "total_episodes": self.total_episodes,
            "train_seconds": self._train_seconds(),
            "evaluations": 0,
        }
        state = ckpt.training_state(
            self, self.run_config, self.game.action_nvec, False, counters, -math.inf, [rng]
        )
        path = ckpt.iteration_path(experiment.ckpt_dir, self.iteration)
        ckpt.save_checkpoint(state, path)
        self._say(f"Saving the checkpoint to the file '{path}'")

    def _say(self, message: str) -> None:
        if self.verbose:
            self.print(f"[{self.game.env.device}]: {message}")

    def _live_collector(self) -> Collector:
        if self.collector is None:
            raise RuntimeError("TagLightningModule was closed; build a new module to train again")
        return self.collector

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
        runners blue, tagged runners grey (``gpu_envs.tag_rendering``).
        """
        frames = animate_episode(self.fetch_episode_states(seed=seed, greedy=greedy), size=size)
        if path is not None:
            save_animation(frames, path, fps=fps)
        return frames

    # ------------------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Release the env's buffers and the rollout buffers (and CUDA's cached blocks), and close
        the experiment folder's logs."""
        if self.collector is None:
            return
        self.game.close()
        self.collector = None
        for group in self.groups:
            group.optimizer = group.step = None
        if self.experiment is not None:
            self.experiment.close()
        if self.game.env.device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"[{self.game.env.device}]: Trainer exits gracefully", flush=True)

    def graceful_close(self) -> None:
        """``close()``, under the notebook's name (``wd_module.graceful_close()``)."""
        self.close()


def _agent_steps(record: IterationRecord) -> float:
    return sum(p["agentstep_count"] for p in record.policies.values())


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


#: The notebook's name for ``EnvResetCallback``.
CUDACallback = EnvResetCallback


class PerfStatsCallback(pl.Callback):
    """Prints the speed block (ms per iteration per phase, env-steps/s, agent-steps/s) and logs it.

    Args:
        batch_size: env steps per iteration, as the notebook passes it
            (``wd_module.training_batch_size``); None: the module's. Checked against the module.
        num_iters: iterations of the run (``wd_module.num_iters``); None: the module's. Checked
            against the module.
        log_freq: print every ``log_freq`` iterations (and at the last one); None follows the
            module's ``saving.metrics_log_freq``.
    """

    def __init__(
        self,
        batch_size: int | None = None,
        num_iters: int | None = None,
        log_freq: int | None = None,
    ):
        if log_freq is not None and log_freq < 1:
            raise ValueError(f"log_freq must be >= 1 or None, got {log_freq}")
        self.batch_size, self.num_iters, self.log_freq = batch_size, num_iters, log_freq
        self._speed = console.SpeedWindow()

    def on_fit_start(self, trainer: pl.Trainer, pl_module: TagLightningModule) -> None:
        for name, given, actual in (
            ("batch_size", self.batch_size, pl_module.training_batch_size),
            ("num_iters", self.num_iters, pl_module.num_iters),
        ):
            if given is not None and given != actual:
                raise ValueError(
                    f"PerfStatsCallback({name}={given}) but the module has {actual} "
                    f"(module.{'training_batch_size' if name == 'batch_size' else name}); "
                    "pass the module's value or leave it out"
                )

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: TagLightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._speed.begin()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: TagLightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        record = pl_module.last_record
        if record is None:
            return
        self._speed.add(pl_module.last_phase_ms, _agent_steps(record))
        due = (
            pl_module.log_due()
            if self.log_freq is None
            else (pl_module.iteration % self.log_freq == 0 or pl_module.is_last_iteration())
        )
        if not due:
            return
        speed = self._speed.block(
            pl_module.iteration, pl_module.num_iterations, pl_module.steps_per_iteration
        )
        values = {f"perf/{name}": value for name, value in speed.items()}
        values["charts/SPS"] = speed["Mean env-steps per sec (total)"]
        pl_module.log_dict(
            {k: v for k, v in values.items() if isinstance(v, float) and math.isfinite(v)},
            on_step=True,
            on_epoch=False,
            batch_size=1,
        )
        pl_module.print(console.format_block("Speed performance stats", speed))
