"""Lightning's ``Trainer`` over Tag: the flow of the original GPU framework's Lightning notebook.

``TagLightningModule`` plays the role of ``WarpDriveModule``, ``EnvResetCallback`` the one of
``CUDACallback`` and ``PerfStatsCallback`` keeps its name::

    env = gpu_envs.TagEnv(num_envs=run_config["trainer"]["num_envs"], device="cuda",
                          **run_config["env"])
    policy_tag_to_agent_id_map = {"tagger": list(env.taggers), "runner": list(env.runners)}
    module = TagLightningModule(env=env, config=run_config,
                                policy_tag_to_agent_id_map=policy_tag_to_agent_id_map)
    trainer = lightning.pytorch.Trainer(accelerator="gpu", devices=1,
                                        callbacks=[EnvResetCallback(), PerfStatsCallback()],
                                        max_epochs=num_episodes * episode_length / train_batch_size,
                                        log_every_n_steps=1, reload_dataloaders_every_n_epochs=1)
    trainer.fit(module)
    module.close()

One epoch is one training iteration: the dataloader yields a single placeholder item, and
``training_step`` runs the Fabric trainer's iteration with the same pieces: the rollout
(``rollout.Collector``), then ``learner.learn`` (every policy's PPO or A2C update, with its own
optimizer through Lightning's manual optimisation, and the divergence check). Per-policy metrics go
to ``self.log`` under the notebook's names (``<policy>/<name>``) and CleanRL's
(``metrics.cleanrl_metrics``), and are printed as the notebook's blocks every
``saving.metrics_log_freq`` iterations. One device (``devices=1``), 32-bit precision; for several
GPUs use the Fabric trainer (``gpu_envs.trainers.fabric_loop``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from gpu_envs.tag import TagEnv
from gpu_envs.trainers import console, learner
from gpu_envs.trainers.config import ConfigError, RunConfig
from gpu_envs.trainers.games import TagGame
from gpu_envs.trainers.metrics import IterationRecord, MetricsWindow, cleanrl_metrics
from gpu_envs.trainers.policy import make_network
from gpu_envs.trainers.rollout import Collector, PolicyGroup, agent_index
from gpu_envs.trainers.sampling import make_sampler
from gpu_envs.trainers.timing import PHASES, PhaseTimer


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
        config: the run config, a plain dict (the notebook's ``run_config``) or a ``RunConfig``.
        policy_tag_to_agent_id_map: policy name -> agent ids; None maps ``tagger``/``runner`` to the
            teams (or one policy to every agent).
        verbose: print the per-policy metric blocks every ``saving.metrics_log_freq`` iterations.
    """

    def __init__(
        self,
        env: TagEnv,
        config: RunConfig | dict[str, Any],
        policy_tag_to_agent_id_map: dict[str, list[int]] | None = None,
        verbose: bool = True,
    ):
        super().__init__()
        self.automatic_optimization = False
        self.run_config = config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
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

        pl.seed_everything(tc.seed, verbose=False)
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
            self.game, self.groups, tc.num_steps, self.sampler, self.timer
        )
        self.window = MetricsWindow(tags, len(nvec))

        self.steps_per_iteration = tc.num_steps * tc.num_envs
        total = tc.total_timesteps or tc.num_episodes * self.game.episode_length
        self.num_iterations = max(1, total // self.steps_per_iteration)
        self.iteration = 0
        self.env_step = 0
        self.last_record: IterationRecord | None = None
        self._unprinted: list[IterationRecord] = []

    @property
    def training_batch_size(self) -> int:
        """Env steps per iteration (the notebook's ``wd_module.training_batch_size``)."""
        return self.steps_per_iteration

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

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        """One iteration: a rollout on the device, then every trained policy's PPO/A2C update."""
        del batch, batch_idx
        collector = self._live_collector()
        if collector.obs is None:
            raise RuntimeError(
                "the envs were never reset: add EnvResetCallback() to the Trainer's callbacks"
            )
        self.timer.reset()
        self.iteration += 1
        rollout = collector.collect()
        with self.timer.phase("training"):
            stats = learner.learn(self.groups, rollout, self.iteration, self.num_iterations)
        self.env_step += self.steps_per_iteration
        self.window.add(self.iteration, self.env_step, stats, collector)
        (self.last_record,) = self.window.flush()  # the iteration's one device-to-host read
        self._log_metrics(self.last_record)

    def log_due(self) -> bool:
        """Whether this iteration prints: every ``saving.metrics_log_freq`` iterations and the
        last one."""
        trainer = self.trainer
        last_epoch = (
            trainer.max_epochs is not None and trainer.current_epoch + 1 >= trainer.max_epochs
        )
        return (
            self.iteration % self.run_config.saving.metrics_log_freq == 0
            or self.iteration == self.num_iterations
            or last_epoch
        )

    def _log_metrics(self, record: IterationRecord) -> None:
        """``self.log`` every policy's metrics of this iteration; when ``log_due()``, print the
        notebook's blocks (episode statistics over the iterations since the last print)."""
        self._unprinted.append(record)
        heads = len(self.game.action_nvec)
        values = cleanrl_metrics([record], [g.tag for g in self.groups])
        for group in self.groups:
            block = console.policy_block(group, [record], heads)
            values.update({f"{group.tag}/{name}": value for name, value in block.items()})
        self.log_dict(values, on_step=True, on_epoch=False, batch_size=1)
        if not self.log_due():
            return
        if self.verbose:
            blocks = [
                console.format_block(
                    f"Metrics for policy '{group.tag}'",
                    console.policy_block(group, self._unprinted, heads),
                )
                for group in self.groups
            ]
            self.print("\n".join(blocks))
        self._unprinted = []

    def _live_collector(self) -> Collector:
        if self.collector is None:
            raise RuntimeError("TagLightningModule was closed; build a new module to train again")
        return self.collector

    # ------------------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Release the env's buffers and the rollout buffers (and CUDA's cached blocks)."""
        if self.collector is None:
            return
        self.game.close()
        self.collector = None
        for group in self.groups:
            group.optimizer = group.step = None
        if self.game.env.device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"[{self.game.env.device}]: Trainer exits gracefully", flush=True)


class EnvResetCallback(pl.Callback):
    """Resets the envs on their device when training starts (the notebook's ``CUDACallback``)."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: TagLightningModule) -> None:
        pl_module.reset_envs()


class PerfStatsCallback(pl.Callback):
    """Prints the speed block (ms per iteration per phase, env-steps/s, agent-steps/s) and logs it.

    Args:
        log_freq: print every ``log_freq`` iterations (and at the last one); None follows the
            module's ``saving.metrics_log_freq``.
    """

    def __init__(self, log_freq: int | None = None):
        if log_freq is not None and log_freq < 1:
            raise ValueError(f"log_freq must be >= 1 or None, got {log_freq}")
        self.log_freq = log_freq
        self._reset_window()

    def _reset_window(self) -> None:
        self._start: float | None = None
        self._iterations = 0
        self._agent_steps = 0.0
        self._phase_ms = dict.fromkeys(PHASES, 0.0)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: TagLightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._start is None:
            self._start = time.perf_counter()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: TagLightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        for name, ms in pl_module.timer.totals_ms().items():
            self._phase_ms[name] += ms
        self._iterations += 1
        self._agent_steps += sum(
            p["agentstep_count"] for p in pl_module.last_record.policies.values()
        )
        due = (
            pl_module.log_due()
            if self.log_freq is None
            else (
                pl_module.iteration % self.log_freq == 0
                or pl_module.iteration == pl_module.num_iterations
            )
        )
        if not due:
            return
        total_ms = 1000.0 * (time.perf_counter() - self._start)
        speed = console.speed_block(
            pl_module.iteration,
            pl_module.num_iterations,
            self._iterations,
            self._phase_ms,
            total_ms,
            pl_module.steps_per_iteration * self._iterations,
            int(self._agent_steps),
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
        self._reset_window()
