"""The training loop on Lightning Fabric: ``Trainer.fit`` reads as CleanRL's ``ppo.py``.

One iteration, top to bottom::

    rollout = collector.collect()                        # every env steps num_steps, on the device
    stats = learner.learn(groups, rollout, ...)          # per policy: anneal the learning rate,
                                                         # GAE, epochs of minibatches (ppo.update);
                                                         # stop if a loss or grad norm diverged
    window.add(...)                                      # statistics stay on the device
    every eval_freq iterations: greedy evaluation        # ckpt_best.pth.tar, stop_value
    every metrics_log_freq iterations: log               # fabric.log_dict, the folder, the console
    every model_params_save_freq iterations: save        # iteration_<N>.pth.tar

Distributed through Fabric (DDP): every rank runs its own envs (seeds ``seed + rank * num_envs +
i``) and its own rollout; DDP averages the gradients. The collectives (``fabric.all_reduce`` of the
metrics, the episode count and the evaluation score, ``fabric.all_gather`` of the RNG states for
checkpoints) happen at iterations every rank reaches; only rank 0 writes.
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
from gpu_envs.trainers.metrics import MetricsWindow, cleanrl_metrics
from gpu_envs.trainers.opponents import make_pool
from gpu_envs.trainers.policy import ContinuousActions, make_network
from gpu_envs.trainers.rollout import Collector, PolicyGroup, agent_index
from gpu_envs.trainers.sampling import make_sampler
from gpu_envs.trainers.timing import PhaseTimer


def make_fabric(config: RunConfig):
    """A launched ``lightning.fabric.Fabric`` from the trainer section (``fabric run``'s flags
    win)."""
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
    """PPO/A2C for every policy of ``config`` over its game, on ``fabric``.

    Metrics go through ``fabric.log_dict`` to the experiment folder's loggers (rank 0) and to any
    logger the caller gave the Fabric.
    """

    def __init__(self, fabric, config: RunConfig, resume=None):
        self.fabric, self.config = fabric, config
        tc = config.trainer
        self.rank, self.world_size = fabric.global_rank, fabric.world_size
        self.device = fabric.device
        resume_path, root = resolve_resume(config, resume)

        # The game, and one network, optimizer and gradient step per policy.
        self.game = make_game(config.name, tc.num_envs, self.device, config.env)
        self.nvec = self.game.action_nvec
        agent_map = self.game.default_agent_map(list(config.policy))
        fabric.seed_everything(tc.seed, verbose=False)  # the same initial weights on every rank
        self.groups = [self._make_group(tag, agent_map[tag]) for tag in config.policy]
        fabric.seed_everything(tc.seed + self.rank, verbose=False)  # then each rank samples its own
        self.timer = PhaseTimer(self.device)
        self.sampler = make_sampler(tc.action_sampler, tc.seed + self.rank, self.device)
        self.collector = Collector(
            self.game,
            self.groups,
            tc.num_steps,
            self.sampler,
            self.timer,
            # the same draws on every rank: one pool state for the checkpoint
            make_pool(self.groups, config.opponents, tc.num_envs, tc.seed),
        )
        learner.make_steps(
            self.groups,
            fabric.backward,
            self.collector.buffers,
            self.nvec,
            compile=tc.compile,
            fuse=self.world_size == 1,  # DDP's gradient hooks need the module's own backward
        )

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
        self.env_step = 0  # every rank's
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
        self.window = MetricsWindow([g.tag for g in self.groups], len(self.nvec))
        self.video_game = None

    def _make_group(self, tag: str, agent_ids: list[int]) -> PolicyGroup:
        cfg = self.config.policy[tag]
        module = make_network(self.game.obs_dim, self.nvec, cfg, tag)
        agents = agent_index(agent_ids, self.device)
        if not cfg.to_train:
            model = self.fabric.to_device(module)
            return PolicyGroup(tag, cfg, model, module, None, agents, len(agent_ids))
        optimizer = learner.make_optimizer(module, cfg, self.device)
        model, optimizer = self.fabric.setup(module, optimizer)
        if self.world_size == 1:
            # One process, 32-bit: Fabric's wrapper would only add per-call overhead to the
            # training forward passes; with DDP the wrapper's forward is what syncs gradients.
            model = module
        return PolicyGroup(tag, cfg, model, module, optimizer, agents, len(agent_ids))

    # ------------------------------------------------------------------------------ the loop
    def fit(self) -> dict:
        """Train until ``num_iterations`` or until the evaluation reaches ``stop_value``."""
        tc, saving = self.config.trainer, self.config.saving
        self.collector.warm_up()  # the env's and the sampler's kernels compile before the clock
        if self.evaluator is not None:
            self.evaluator.game.reset(0)
        self.collector.reset(tc.seed + self.rank * tc.num_envs)
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
                rollout = self.collector.collect()
                with self.timer.phase("training"):
                    stats = learner.learn(self.groups, rollout, self.iteration, self.num_iterations)
                self.env_step += self.steps_per_iteration
                self.episodes += self.collector.env_done.sum()
                self.window.add(self.iteration, self.env_step, stats, self.collector)
                window_iterations += 1

                last = self.iteration == self.num_iterations
                if self.evaluator is not None and (
                    self.iteration % self.config.evaluation.eval_freq == 0 or last
                ):
                    with self.clock.paused():
                        stop = self._evaluate(progress)
                if self.iteration % saving.metrics_log_freq == 0 or last or stop:
                    window_ms = 1000.0 * (self.clock.seconds() - window_start)
                    self._log(progress, window_iterations, window_ms)
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

    def _total_episodes(self) -> int:
        """Episodes ended on every rank so far (collective: every rank calls it at once)."""
        count = self.fabric.all_reduce(self.episodes.clone(), reduce_op="sum")
        return self.episodes_before + int(count)

    def _log(self, progress, window_iterations: int, window_ms: float) -> None:
        """The window's metrics to Fabric's loggers, then the folder's logs and the console."""
        # Collectives first, on every rank: the window's statistics and the episode count.
        records = self.window.flush(self.fabric.all_reduce if self.world_size > 1 else None)
        total_episodes = self._total_episodes()
        phase_ms = self.timer.totals_ms()
        self.timer.reset()
        env_steps = self.steps_per_iteration * len(records)
        agent_steps = sum(p["agentstep_count"] for r in records for p in r.policies.values())
        speed = console.speed_block(
            self.iteration,
            self.num_iterations,
            window_iterations,
            phase_ms,
            window_ms,
            env_steps,
            int(agent_steps),
        )
        metrics = cleanrl_metrics(records, [g.tag for g in self.groups])
        metrics["charts/SPS"] = speed["Mean env-steps per sec (total)"]
        self.fabric.log_dict(metrics, step=self.env_step)
        if self.rank != 0:
            return
        blocks = {g.tag: console.policy_block(g, records, len(self.nvec)) for g in self.groups}
        self.experiment.log_window(
            records,
            blocks,
            speed,
            env_steps,
            collect_seconds=sum(ms for p, ms in phase_ms.items() if p != "training") / 1000.0,
            total_episodes=total_episodes,
            train_seconds=self.clock.seconds(),
        )
        progress.print(console.format_blocks(blocks, speed))

    def _evaluate(self, progress) -> bool:
        """Greedy evaluation on every rank; rank 0 logs it and keeps ckpt_best. Returns "stop"."""
        result = self.evaluator.run()
        means = torch.stack([result["returns"][g.tag].mean() for g in self.groups]).double()
        if self.world_size > 1:
            means = self.fabric.all_reduce(means, reduce_op="mean")
        means = dict(zip([g.tag for g in self.groups], means.tolist()))
        score = means[self.score_policy]
        improved = score > self.best_score
        self.best_score = max(self.best_score, score)
        if improved:
            self._save(self.experiment.ckpt_dir / "ckpt_best.pth.tar" if self.rank == 0 else None)
        stop_value = self.config.evaluation.stop_value
        stop = stop_value is not None and score >= stop_value
        if self.rank == 0:
            self.experiment.log_evaluation(
                self.iteration, self.env_step, result, means, self.clock.seconds()
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
        counters = {
            "total_episodes": total_episodes,
            "train_seconds": self.clock.seconds(),
            "evaluations": self.evaluator.evaluations if self.evaluator else 0,
        }
        continuous = isinstance(self.nvec, ContinuousActions)
        state = ckpt.training_state(
            self, self.config, self.nvec, continuous, counters, self.best_score, rng
        )
        ckpt.save_checkpoint(state, path)

    def _gather_rng(self) -> list[dict]:
        states = {"torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            states["cuda"] = torch.cuda.get_rng_state(self.device)
        if self.world_size == 1:
            return [states]
        gathered = {k: self.fabric.all_gather(v.to(self.device)).cpu() for k, v in states.items()}
        return [{k: v[r] for k, v in gathered.items()} for r in range(self.world_size)]

    def _restore(self, path: Path) -> None:
        state = ckpt.load_checkpoint(path)
        ckpt.check_compatible(
            state,
            path,
            self.game.obs_dim,
            self.nvec,
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
        if self.collector.opponents is not None:
            if state.get("opponents") is None:
                raise ckpt.CheckpointError(
                    f"{path} holds no opponent pool (a run with opponents.share 0); resume it "
                    "with its own config"
                )
            self.collector.opponents.load_state_dict(state["opponents"])
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
