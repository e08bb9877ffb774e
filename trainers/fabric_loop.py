"""The training loop on Lightning Fabric: collect on the device, update every policy, log, evaluate, save.

Read top to bottom, ``Trainer.fit`` is::

    for iteration in range(start + 1, num_iterations + 1):
        anneal the learning rates
        rollout  = collector.collect()                 # device only, no host sync
        update every trained policy on its rollout     # GAE + PPO epochs / one A2C step
        stop if a loss or gradient norm is not finite  # one host read; nothing more is saved
        every metrics_log_freq iterations: read the window back, print, log, TensorBoard, results.json
        every eval_freq iterations: greedy evaluation (all ranks), ckpt_best.pth.tar, stop_value
        every model_params_save_freq iterations: iteration_<N>.pth.tar

Distributed through Fabric (DDP): every rank runs its own envs (seeds ``seed + rank * num_envs + i``)
and its own rollout; DDP averages the gradients. All collectives (metric reduction, evaluation
score, RNG gathering for checkpoints) happen at iterations every rank reaches; only rank 0 writes.
"""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from gpu_envs.trainers import checkpoint as ckpt
from gpu_envs.trainers import console, learner
from gpu_envs.trainers.config import RunConfig
from gpu_envs.trainers.evaluation import EVAL_SEED_OFFSET, Evaluator, record_video
from gpu_envs.trainers.experiment import Experiment, NullExperiment, experiment_root, fresh_root
from gpu_envs.trainers.games import make_game
from gpu_envs.trainers.metrics import (
    MetricsWindow,
    cleanrl_metrics,
    episode_summary,
    learner_summary,
)
from gpu_envs.trainers.policy import ActorCritic, ContinuousActions
from gpu_envs.trainers.rollout import Collector, PolicyGroup
from gpu_envs.trainers.sampling import make_sampler
from gpu_envs.trainers.timing import PHASES, PhaseTimer


def make_fabric(config: RunConfig):
    """A launched ``lightning.fabric.Fabric`` from the trainer section (the ``fabric run`` flags win)."""
    from lightning.fabric import Fabric
    from lightning.fabric.plugins import Precision

    tc = config.trainer
    if os.environ.get("LT_CLI_USED") == "1":
        fabric = Fabric()  # `fabric run` created the processes; Fabric() joins them (no launch())
    else:
        accelerator = "cuda" if tc.accelerator == "gpu" else tc.accelerator
        fabric = Fabric(
            accelerator=accelerator,
            devices=tc.devices,
            strategy=tc.strategy,
            num_nodes=tc.num_nodes,
        )
        fabric.launch()
    if type(fabric.strategy.precision) is not Precision:
        raise ValueError(
            f"the trainers run in 32-bit precision (fabric run --precision 32-true), got "
            f"{type(fabric.strategy.precision).__name__}"
        )
    return fabric


def resolve_resume(config: RunConfig, resume) -> tuple[Path | None, Path]:
    """(checkpoint to resume from or None, experiment folder to write into).

    ``resume``: None/False (new run), True (latest checkpoint of the config's experiment folder),
    or a path to a checkpoint file or an experiment folder. Of a folder's checkpoints, the newest
    readable one is taken; newer damaged ones are skipped with a warning.
    """
    root = experiment_root(config)
    if not resume:
        return None, root
    if resume is True:
        path = ckpt.latest_readable_checkpoint(root / "ckpt")
        if path is None:
            raise ckpt.CheckpointError(
                f"--resume: no readable iteration_<N>.pth.tar checkpoint in {root / 'ckpt'}"
            )
        return path, root
    path = Path(resume)
    if path.is_dir():
        folder = path / "ckpt" if (path / "ckpt").is_dir() else path
        found = ckpt.latest_readable_checkpoint(folder)
        if found is None:
            raise ckpt.CheckpointError(
                f"--resume {path}: no readable iteration_<N>.pth.tar checkpoint there"
            )
        path = found
    return path, path.parent.parent if path.parent.name == "ckpt" else root


class Trainer:
    """PPO/A2C for every policy of ``config`` over its game, on ``fabric``."""

    def __init__(self, fabric, config: RunConfig, resume=None):
        self.fabric, self.config = fabric, config
        tc = config.trainer
        self.rank, self.world_size = fabric.global_rank, fabric.world_size
        self.device = fabric.device
        resume_path, root = resolve_resume(config, resume)

        self.game = make_game(config.name, tc.num_envs, self.device, config.env)
        agent_map = self.game.default_agent_map(list(config.policy))
        fabric.seed_everything(tc.seed, verbose=False)  # the same initial weights on every rank
        self.groups = [self._make_group(tag, agent_map[tag]) for tag in config.policy]
        fabric.seed_everything(tc.seed + self.rank, verbose=False)  # then each rank samples its own
        self.timer = PhaseTimer(self.device)
        self.sampler = make_sampler(tc.action_sampler, tc.seed + self.rank, self.device)
        self.collector = Collector(self.game, self.groups, tc.num_steps, self.sampler, self.timer)
        eval_cfg = config.evaluation
        self.evaluator = None
        if eval_cfg.eval_freq:
            eval_game = make_game(config.name, eval_cfg.num_episodes, self.device, config.env)
            self.evaluator = Evaluator(
                eval_game,
                self.groups,
                tc.seed + EVAL_SEED_OFFSET + self.rank * eval_cfg.num_episodes,
            )
        self.score_policy = eval_cfg.score_policy or next(iter(config.policy))

        total = tc.total_timesteps or tc.num_episodes * self.game.episode_length
        self.steps_per_iteration = tc.num_steps * tc.num_envs * self.world_size
        self.num_iterations = max(1, total // self.steps_per_iteration)
        self.iteration = 0
        self.env_step = 0
        self.episodes = torch.zeros((), dtype=torch.int64, device=self.device)  # this rank's
        self.episodes_before = 0  # every rank's, before a resume
        self.best_score = -math.inf
        self.clock = TrainClock()
        if resume_path is not None:
            self._restore(resume_path)
        elif self.rank == 0:
            root = fresh_root(root)
        self.experiment = Experiment(root, config) if self.rank == 0 else NullExperiment()
        fabric.loggers.extend(self.experiment.loggers)  # rank 0: the folder's TensorBoard and CSV
        self.window = MetricsWindow([g.tag for g in self.groups], len(self.game.action_nvec))
        self.video_game = None

    # ------------------------------------------------------------------------------ set-up
    def _make_group(self, tag: str, agent_ids: list[int]) -> PolicyGroup:
        cfg = self.config.policy[tag]
        module = ActorCritic(self.game.obs_dim, self.game.action_nvec, cfg.model)
        if cfg.model.model_ckpt_filepath:
            module.load_state_dict(ckpt.load_model_weights(cfg.model.model_ckpt_filepath, tag))
        ids = sorted(agent_ids)
        contiguous = ids == list(range(ids[0], ids[-1] + 1))
        agents = slice(ids[0], ids[-1] + 1) if contiguous else torch.tensor(ids, device=self.device)
        if cfg.to_train:
            optimizer = torch.optim.Adam(
                module.parameters(),
                lr=cfg.lr,
                eps=cfg.adam_eps,
                fused=self.device.type in ("cpu", "cuda"),
            )
            model, optimizer = self.fabric.setup(module, optimizer)
            if self.world_size == 1:
                # One process, 32-bit: Fabric's wrapper would only add per-call overhead to the
                # training forward passes; with DDP the wrapper's forward is what syncs gradients.
                model = module
        else:
            module.requires_grad_(False)
            model, optimizer = self.fabric.to_device(module), None
        return PolicyGroup(tag, cfg, model, module, optimizer, agents, len(ids))

    def _restore(self, path: Path) -> None:
        state = ckpt.load_checkpoint(path)
        ckpt.check_compatible(
            state,
            path,
            self.game.obs_dim,
            self.game.action_nvec,
            {g.tag: g.module for g in self.groups},
            {g.tag: self.config.policy[g.tag].model for g in self.groups},
        )
        for group in self.groups:
            saved = state["policies"][group.tag]
            group.module.load_state_dict(saved["model"])
            if group.optimizer is not None and saved.get("optimizer") is not None:
                group.optimizer.load_state_dict(saved["optimizer"])
        self.iteration, self.env_step = int(state["iteration"]), int(state["env_step"])
        self.episodes_before = int(state["counters"]["total_episodes"])
        self.clock.previous = float(state["counters"]["train_seconds"])
        self.best_score = float(state["best_eval"])
        self.sampler.load_state_dict(state["sampler"])
        if self.evaluator is not None:
            self.evaluator.evaluations = int(state["counters"]["evaluations"])
        rng = state["rng"]
        if len(rng) == self.world_size:
            torch.set_rng_state(rng[self.rank]["torch"])
            if self.device.type == "cuda" and rng[self.rank].get("cuda") is not None:
                torch.cuda.set_rng_state(rng[self.rank]["cuda"], self.device)
        if self.rank == 0:
            print(
                f"Resuming from {path} at iteration {self.iteration} (env step {self.env_step})",
                flush=True,
            )

    # ------------------------------------------------------------------------------ loop
    def fit(self) -> dict:
        """Train until ``num_iterations`` or until the evaluation reaches ``stop_value``."""
        tc, saving = self.config.trainer, self.config.saving
        env_seed = tc.seed + self.rank * tc.num_envs
        self._warm_up(env_seed)
        self.collector.reset(env_seed)
        self.experiment.log_models({g.tag: g.module for g in self.groups})
        progress = console.Progress(
            self.num_iterations, self.iteration, tc.progress_bar and self.rank == 0
        )
        self.clock.start()
        window_start, window_iterations = self.clock.seconds(), 0
        stop = False
        try:
            while self.iteration < self.num_iterations and not stop:
                self.iteration += 1
                for group in self.groups:
                    if group.optimizer is not None:
                        learner.set_learning_rate(group, self.iteration, self.num_iterations)
                buffers = self.collector.collect()
                with self.timer.phase("training"):
                    stats = {
                        g.tag: learner.update(self.fabric, g, buffers[g.tag], self.game.action_nvec)
                        for g in self.groups
                    }
                    learner.check_finite(self.groups, stats, self.iteration)
                self.env_step += self.steps_per_iteration
                self.episodes += self.collector.env_done.sum()
                self.window.add(
                    self.iteration,
                    self.env_step,
                    stats,
                    {g.tag: learner.action_std(buffers[g.tag]) for g in self.groups},
                    {g.tag: self._episode_stats(g, buffers[g.tag]) for g in self.groups},
                )
                window_iterations += 1
                last = self.iteration == self.num_iterations
                if self.evaluator is not None and (
                    self.iteration % self.config.evaluation.eval_freq == 0 or last
                ):
                    with self.clock.paused():
                        stop = self._evaluate(progress)
                if self.iteration % saving.metrics_log_freq == 0 or last or stop:
                    self._log(
                        progress, window_iterations, 1000.0 * (self.clock.seconds() - window_start)
                    )
                    window_start, window_iterations = self.clock.seconds(), 0
                if self.iteration % saving.model_params_save_freq == 0 or last or stop:
                    self._save(ckpt.iteration_path(self.experiment.ckpt_dir or ".", self.iteration))
                progress.advance()
        finally:
            progress.close()
            self.experiment.close()
            for logger in self.experiment.loggers:
                self.fabric.loggers.remove(logger)
        return {
            "iterations": self.iteration,
            "env_steps": self.env_step,
            "best_eval": self.best_score,
            "train_seconds": self.clock.seconds(),
            "experiment": str(self.experiment.root),
        }

    def _warm_up(self, env_seed: int) -> None:
        """Compile the env kernels, the sampler and (``trainer.compile``) the losses before the clock starts."""
        self.game.reset(env_seed)
        self.game.step(torch.zeros_like(self.collector.actions))
        logits = torch.zeros((2, sum(self.game.action_nvec)), device=self.device)
        self.sampler(logits, self.game.action_nvec)
        if self.evaluator is not None:
            self.evaluator.game.reset(0)
        if self.config.trainer.compile:
            learner.compile_losses(
                self.fabric,
                self.groups,
                self.collector.buffers,
                self.game.action_nvec,
                fuse_optimizer=self.world_size == 1,
            )

    def _episode_stats(self, group: PolicyGroup, buf) -> dict[str, torch.Tensor]:
        stats = self.collector.episode_stats(group)
        stats["agentstep_count"] = buf.valid.sum().double()
        return stats

    # ------------------------------------------------------------------------------ logging
    def _total_episodes(self) -> int:
        """Episodes ended on every rank so far (collective: every rank calls it at once)."""
        count = self.fabric.all_reduce(self.episodes.clone(), reduce_op="sum")
        return self.episodes_before + int(count)

    def _log(self, progress, window_iterations: int, total_ms: float) -> None:
        # Collectives first, on every rank: the window's statistics and the episode count.
        records = self.window.flush(self.fabric.all_reduce if self.world_size > 1 else None)
        total_episodes = self._total_episodes()
        phase_ms = self.timer.totals_ms()
        self.timer.reset()
        env_steps = self.steps_per_iteration * len(records)
        metrics = cleanrl_metrics(records, [g.tag for g in self.groups])
        metrics["charts/SPS"] = env_steps / total_ms * 1000.0
        self.fabric.log_dict(metrics, step=self.env_step)
        if self.rank != 0:
            return
        exp, last = self.experiment, records[-1]
        agent_steps = sum(
            sum(r.policies[g.tag]["agentstep_count"] for g in self.groups) for r in records
        )
        collect_s = sum(phase_ms[p] for p in PHASES if p != "training") / 1000.0
        results = {"Iterations Completed": self.iteration}
        blocks = []
        for group in self.groups:
            summary = learner_summary(records, group.tag)
            exp.learner_table(self.iteration, group.tag, summary)
            exp.scalars(
                "learner",
                self.iteration,
                self.env_step,
                {f"{group.tag}/{k}": v for k, v in summary.items()},
            )
            episodes = episode_summary(records, group.tag)
            collector = {
                "episode_count": episodes["episode_count"],
                "envstep_count": env_steps,
                "avg_envstep_per_episode": episodes["avg_envstep_per_episode"],
                "avg_envstep_per_sec": env_steps / collect_s if collect_s else float("nan"),
                "avg_episode_per_sec": episodes["episode_count"] / collect_s
                if collect_s
                else float("nan"),
                "collect_time": collect_s,
                "reward_mean": episodes["reward_mean"],
                "reward_std": episodes["reward_std"],
                "reward_max": episodes["reward_max"],
                "reward_min": episodes["reward_min"],
                "total_envstep_count": self.env_step,
                "total_episode_count": total_episodes,
                "total_duration": self.clock.seconds(),
            }
            exp.collector_table(self.iteration, group.tag, collector)
            exp.scalars(
                "collector",
                self.iteration,
                self.env_step,
                {f"{group.tag}/{k}": v for k, v in collector.items()},
            )
            block = console.policy_block(
                group.tag,
                group.config,
                last.policies[group.tag],
                episodes,
                len(self.game.action_nvec),
                group.num_agents,
                self.env_step,
            )
            results[group.tag] = block
            blocks.append(console.format_block(f"Metrics for policy '{group.tag}'", block))
        speed = console.speed_block(
            self.iteration,
            self.num_iterations,
            window_iterations,
            phase_ms,
            total_ms,
            env_steps,
            int(agent_steps),
        )
        results["Perf. Stats"] = speed
        blocks.append(console.format_block("Speed performance stats", speed))
        progress.print("\n".join(blocks))
        exp.scalars(
            "speed",
            self.iteration,
            self.env_step,
            {k: v for k, v in speed.items() if k != "Iteration"},
        )
        exp.results(results)

    def _evaluate(self, progress) -> bool:
        """Greedy evaluation on every rank; rank 0 logs it and keeps ckpt_best. Returns "stop"."""
        result = self.evaluator.run()
        means = torch.stack([result["returns"][g.tag].mean() for g in self.groups]).to(
            torch.float64
        )
        if self.world_size > 1:
            means = self.fabric.all_reduce(means, reduce_op="mean")
        means = means.tolist()
        score = means[[g.tag for g in self.groups].index(self.score_policy)]
        improved = score > self.best_score
        self.best_score = max(self.best_score, score)
        if improved:
            self._save(self.experiment.ckpt_dir / "ckpt_best.pth.tar" if self.rank == 0 else None)
        stop_value = self.config.evaluation.stop_value
        stop = stop_value is not None and score >= stop_value
        if self.rank == 0:
            for group, mean in zip(self.groups, means):
                returns = result["returns"][group.tag]
                values = {
                    "train_iter": self.iteration,
                    "ckpt_name": f"iteration_{self.iteration}.pth.tar",
                    "episode_count": returns.numel(),
                    "envstep_count": result["envsteps"],
                    "evaluate_time": result["seconds"],
                    "avg_envstep_per_episode": result["envsteps"] / returns.numel(),
                    "avg_envstep_per_sec": result["envsteps"] / result["seconds"],
                    "avg_time_per_episode": result["seconds"] / returns.numel(),
                    "reward_mean": mean,
                    "reward_std": float(returns.std(unbiased=False)),
                    "reward_max": float(returns.max()),
                    "reward_min": float(returns.min()),
                    "train_time_s": self.clock.seconds(),
                }
                self.experiment.evaluator_table(self.iteration, group.tag, values)
                self.experiment.scalars(
                    "evaluator",
                    self.iteration,
                    self.env_step,
                    {f"{group.tag}/{k}": v for k, v in values.items() if k != "ckpt_name"},
                )
            progress.print(
                f"[eval] iteration {self.iteration}, env step {self.env_step}: "
                f"{self.score_policy} mean return {score:.2f} (best {self.best_score:.2f}), "
                f"train time {self.clock.seconds():.2f} s"
                + (" -> stop_value reached" if stop else "")
            )
            if self.config.trainer.capture_video:
                self._record_video()
        return stop

    def _record_video(self) -> None:
        if self.video_game is None:
            self.video_game = make_game(
                self.config.name, 1, self.device, self.config.env, render_mode="rgb_array"
            )
        path = record_video(
            self.video_game, self.groups, self.experiment.video_dir / f"iteration_{self.iteration}"
        )
        print(f"[video] {path}", flush=True)

    # ------------------------------------------------------------------------------ checkpoints
    def _save(self, path: Path | None) -> None:
        """Gather every rank's RNG state and episode count (collectives), then rank 0 writes
        ``path`` atomically."""
        rng, total_episodes = self._gather_rng(), self._total_episodes()
        if self.rank != 0 or path is None:
            return
        self.experiment.flush()  # the logs on disk reach at least as far as the checkpoint
        state = {
            "iteration": self.iteration,
            "env_step": self.env_step,
            "num_iterations": self.num_iterations,
            "counters": {
                "total_episodes": total_episodes,
                "train_seconds": self.clock.seconds(),
                "evaluations": self.evaluator.evaluations if self.evaluator else 0,
            },
            "best_eval": self.best_score,
            "config": self.config.to_dict(),
            "spaces": {
                "obs_dim": self.game.obs_dim,
                "action_nvec": list(self.game.action_nvec),
                "continuous": isinstance(self.game.action_nvec, ContinuousActions),
            },
            "policies": {
                g.tag: {
                    "model": g.module.state_dict(),
                    "optimizer": g.optimizer.state_dict() if g.optimizer is not None else None,
                }
                for g in self.groups
            },
            "sampler": self.sampler.state_dict(),
            "rng": rng,
        }
        ckpt.save_checkpoint(state, path)

    def _gather_rng(self) -> list[dict]:
        states = {"torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            states["cuda"] = torch.cuda.get_rng_state(self.device)
        if self.world_size == 1:
            return [states]
        gathered = {k: self.fabric.all_gather(v.to(self.device)).cpu() for k, v in states.items()}
        return [{k: v[r] for k, v in gathered.items()} for r in range(self.world_size)]


class TrainClock:
    """Training seconds: wall time since ``start()`` without the paused spans (evaluation, video),
    plus ``previous`` (the seconds of the run before a resume)."""

    def __init__(self):
        self.previous = 0.0
        self._start = None
        self._paused = 0.0
        self._pause_start: float | None = None

    def start(self) -> None:
        self._start, self._paused = time.perf_counter(), 0.0

    def seconds(self) -> float:
        """The training seconds so far; it stands still inside ``paused()``."""
        if self._start is None:
            return self.previous
        now = time.perf_counter() if self._pause_start is None else self._pause_start
        return self.previous + now - self._start - self._paused

    @contextmanager
    def paused(self):
        self._pause_start = time.perf_counter()
        try:
            yield
        finally:
            self._paused += time.perf_counter() - self._pause_start
            self._pause_start = None


def train(config: RunConfig, resume=None) -> dict:
    """Launch Fabric from ``config.trainer`` and run the trainer; returns a summary dict."""
    if config.trainer.torch_threads:
        torch.set_num_threads(config.trainer.torch_threads)
    fabric = make_fabric(config)
    return Trainer(fabric, config, resume).fit()
