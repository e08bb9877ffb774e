"""The training loop on Lightning Fabric: ``Trainer.fit`` reads as CleanRL's ``ppo.py``.

One iteration, top to bottom::

    rollout = collector.collect()                        # every env steps num_steps, on the device
    stats = learner.learn(groups, rollout, ...)          # per policy: anneal the learning rate,
                                                         # GAE, epochs of minibatches (ppo.update);
                                                         # stop if a loss or grad norm diverged
    window.add(...)                                      # statistics stay on the device
    every eval_freq iterations: greedy evaluation        # ckpt_best.pth.tar, stop_value
    every scalars_log_freq iterations: scalars           # fabric.log_dict (TensorBoard, CSV)
    every metrics_log_freq iterations: log               # the folder's text logs, the console
    every model_params_save_freq iterations: save        # iteration_<N>.pth.tar; also after
                                                         # checkpoint_minutes, and on SIGINT or
                                                         # SIGTERM, which then end the run

A checkpoint holds everything the run continues from (weights, optimiser, the envs' buffers, the
rollout's carry-over, RNG and sampler states), so an interrupted run resumed from it ends with the
same weights, bit for bit on the CPU, as one that was never stopped.

Distributed through Fabric (DDP): every rank runs its own envs (seeds ``seed + rank * num_envs +
i``) and its own rollout; DDP averages the gradients. The collectives (``fabric.all_reduce`` of the
metrics, the episode count and the evaluation score, ``fabric.all_gather`` of the RNG states for
checkpoints) happen at iterations every rank reaches; only rank 0 writes.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from gpu_envs.trainers import checkpoint as ckpt
from gpu_envs.trainers import console, curves, learner, run_control
from gpu_envs.trainers.config import ConfigError, RunConfig
from gpu_envs.trainers.evaluation import Evaluator, record_video
from gpu_envs.trainers.experiment import Experiment, NullExperiment, experiment_root, fresh_root
from gpu_envs.trainers.games import make_game
from gpu_envs.trainers.metrics import MetricsWindow, cleanrl_metrics, episode_summary
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

    ``resume``: None/False (new run), True (the config's own folder when ``saving.tag`` names
    one, else the newest unfinished run of this config: ``run_control.find_resumable``), or a
    path to a checkpoint file or an experiment folder. Of a
    folder's checkpoints, the newest readable one is taken; newer damaged ones are skipped with a
    warning. A finished run of the same config is refused (there is nothing left to train).
    """
    root = experiment_root(config)
    if not resume:
        return None, root
    if resume is True:
        path = root if config.saving.tag else run_control.find_resumable(config)
    else:
        path = Path(resume)
    if path.is_dir():
        folder = path / "ckpt" if (path / "ckpt").is_dir() else path
        found = ckpt.latest_readable_checkpoint(folder)
        if found is None:
            raise ckpt.CheckpointError(
                f"--resume {path}: no readable iteration_<N>.pth.tar checkpoint there"
            )
        path = found
    root = path.parent.parent if path.parent.name == "ckpt" else root
    status = run_control.read_status(root)
    try:  # through the schema: fields added since the checkpoint take their defaults
        saved = RunConfig.from_dict(ckpt.load_checkpoint(path)["config"]).to_dict()
    except ConfigError:
        saved = None
    if status["status"] == "finished" and run_control.same_config(saved or {}, config.to_dict()):
        raise ckpt.CheckpointError(
            f"--resume: the run in {root} is finished ({status.get('reason', 'done')} at "
            f"iteration {status.get('iteration', '?')}); there is nothing to resume. Continue "
            "it with a longer run (--total-timesteps N) or start a new one without --resume"
        )
    return path, root


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
            cuda_graphs=tc.cuda_graphs,
        )
        eval_cfg = config.evaluation
        self.evaluator = None
        if eval_cfg.eval_freq:
            eval_game = make_game(config.name, eval_cfg.num_episodes, self.device, config.env)
            self.evaluator = Evaluator(eval_game, self.groups, eval_cfg.seed)
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
        self.resumed_from = resume_path
        self._resume_state = None if resume_path is None else self._restore(resume_path)
        if resume_path is None and self.rank == 0:
            root = fresh_root(root)
        self.root = root
        self.experiment = Experiment(root, config) if self.rank == 0 else NullExperiment()
        fabric.loggers.extend(self.experiment.loggers)  # rank 0: the folder's TensorBoard and CSV
        self.window = MetricsWindow([g.tag for g in self.groups], len(self.nvec))
        self.records: list = []  # the host records since the last text log (metrics_log_freq)
        self.last_returns: dict[str, float] = {}  # each policy's latest mean episode return
        self.video_game = None
        self._print(console.banner(self))  # before compiling: a run says what it is at once
        try:
            learner.make_steps(
                self.groups,
                fabric.backward,
                self.collector.buffers,
                self.nvec,
                compile=tc.compile,
                fuse=self.world_size == 1,  # DDP's gradient hooks need the module's own backward
            )
        except KeyboardInterrupt:
            self.discard_if_empty()
            raise

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
        """Train until ``num_iterations``, until the evaluation reaches ``stop_value``, or until
        SIGINT/SIGTERM (then save and return; ``status`` says which)."""
        tc, saving = self.config.trainer, self.config.saving
        if self.iteration >= self.num_iterations:
            raise ckpt.CheckpointError(
                f"--resume: {self.resumed_from} is at the run's last iteration "
                f"({self.iteration} of {self.num_iterations}); there is nothing left to train"
            )
        self.collector.warm_up()  # the env's and the sampler's kernels compile before the clock
        if self.evaluator is not None:
            self.evaluator.game.reset(0)
        self._start_rollouts()
        self.experiment.log_models({g.tag: g.module for g in self.groups})
        self._set_status("running")
        progress = console.Progress(
            self.num_iterations,
            self.iteration,
            tc.progress_bar and self.rank == 0,
            saving.progress_seconds,
            self.env_step,
        )
        self.clock.start()
        self.scalars_start = window_start = self.clock.seconds()
        self.last_save = time.monotonic()
        window_iterations, reached, signal_name, saved_path = 0, False, None, None
        with run_control.StopRequest(self._print) as stop_request:
            try:
                while self.iteration < self.num_iterations:
                    self.iteration += 1
                    rollout = self.collector.collect()
                    with self.timer.phase("training"):
                        stats = learner.learn(
                            self.groups, rollout, self.iteration, self.num_iterations
                        )
                    self.env_step += self.steps_per_iteration
                    self.episodes += self.collector.env_done.sum()
                    self.window.add(self.iteration, self.env_step, stats, self.collector)
                    window_iterations += 1

                    last = self.iteration == self.num_iterations
                    if self.evaluator is not None and (
                        self.iteration % self.config.evaluation.eval_freq == 0 or last
                    ):
                        with self.clock.paused():
                            reached = self._evaluate(progress)
                    interrupted, overdue = self._agree(
                        stop_request.signal_name is not None, self._checkpoint_overdue()
                    )
                    end = last or reached or interrupted
                    if self.iteration % saving.scalars_log_freq == 0 or end:
                        self._log_scalars()
                    if self.iteration % saving.metrics_log_freq == 0 or end:
                        window_ms = 1000.0 * (self.clock.seconds() - window_start)
                        self._log(progress, window_iterations, window_ms)
                        window_start, window_iterations = self.clock.seconds(), 0
                    if self.iteration % saving.model_params_save_freq == 0 or end or overdue:
                        saved_path = ckpt.iteration_path(
                            self.experiment.ckpt_dir or ".", self.iteration
                        )
                        self._save(saved_path)
                    progress.advance(self.iteration, self.env_step, self.last_returns)
                    if reached or interrupted:
                        if interrupted and not (last or reached):  # else the run is complete
                            signal_name = stop_request.signal_name or "SIGTERM"  # another rank's
                        break
            finally:
                progress.close()
                self.experiment.close()
                for logger in self.experiment.loggers:
                    self.fabric.loggers.remove(logger)
        return self._finish(reached, signal_name, saved_path)

    def _finish(self, reached: bool, signal_name: str | None, saved_path: Path | None) -> dict:
        """Record how the run ended (status file, curves.png) and summarise it."""
        if signal_name is not None:
            status, reason = "interrupted", signal_name
        else:
            status = "finished"
            reason = "stop_value reached" if reached else "num_iterations reached"
        self._set_status(status, reason=reason)
        if self.rank == 0:
            curves.write_run_curves(self.root)
        summary = {
            "status": status,
            "reason": reason,
            "iterations": self.iteration,
            "num_iterations": self.num_iterations,
            "env_steps": self.env_step,
            "best_eval": self.best_score,
            "train_seconds": self.clock.seconds(),
            "experiment": str(self.experiment.root),
            "checkpoint": str(saved_path),
        }
        if status == "interrupted":
            summary["resume_command"] = run_control.resume_command(self.root)
        if self.evaluator is not None and self.game.num_agents == 1:
            eval_cfg = self.config.evaluation
            summary["evaluate_command"] = (
                f"gpu-envs evaluate {self.config.game} {self.root / 'ckpt' / 'ckpt_best.pth.tar'}"
                f" --episodes {eval_cfg.num_episodes} --seed {eval_cfg.seed}"
            )
        return summary

    def discard_if_empty(self) -> None:
        """Delete the folder of a new run that saved no checkpoint (nothing to resume there)."""
        if (
            self.rank == 0
            and self.resumed_from is None
            and not ckpt.iteration_checkpoints(self.root / "ckpt")
        ):
            shutil.rmtree(self.root, ignore_errors=True)

    def _print(self, text: str) -> None:
        if self.rank == 0:
            print(text, flush=True)

    def _set_status(self, status: str, **details) -> None:
        if self.rank == 0:
            run_control.write_status(
                self.root,
                status,
                iteration=self.iteration,
                num_iterations=self.num_iterations,
                env_step=self.env_step,
                **details,
            )

    def _checkpoint_overdue(self) -> bool:
        minutes = self.config.saving.checkpoint_minutes
        return bool(minutes) and time.monotonic() - self.last_save >= 60.0 * minutes

    def _agree(self, *flags: bool) -> tuple[bool, ...]:
        """Each flag true on any rank (a collective under DDP: every rank stops and saves at the
        same iteration)."""
        if self.world_size == 1:
            return flags
        tensor = torch.tensor(flags, dtype=torch.int32, device=self.device)
        return tuple(bool(v) for v in self.fabric.all_reduce(tensor, reduce_op="max").tolist())

    def _start_rollouts(self) -> None:
        """A new run resets the envs; a resumed one puts back the saved envs, rollout carry-over,
        RNG and sampler states (after the warm-up, which draws from them)."""
        tc, state = self.config.trainer, self._resume_state
        saved = None if state is None else state["rng"]
        if saved is None or len(saved) != self.world_size or "env" not in saved[self.rank]:
            self.collector.reset(tc.seed + self.rank * tc.num_envs)
            if state is not None:
                self._print(
                    "The checkpoint holds no env state for this number of processes: the envs "
                    "start new episodes (the run continues, not bit for bit)"
                )
        if state is None:
            return
        self.sampler.load_state_dict(state["sampler"])
        if saved is None or len(saved) != self.world_size:
            return
        mine = saved[self.rank]
        torch.set_rng_state(mine["torch"])
        if self.device.type == "cuda" and mine.get("cuda") is not None:
            torch.cuda.set_rng_state(mine["cuda"], self.device)
        if "env" in mine:
            self.game.env.load_buffers_state({k: v.to(self.device) for k, v in mine["env"].items()})
            collector = self.collector
            collector.obs = mine["obs"].to(self.device).clone()
            for name in ("prev_done", "episode_returns", "episode_lengths"):
                getattr(collector, name).copy_(mine[name])
        self._resume_state = None

    def _total_episodes(self) -> int:
        """Episodes ended on every rank so far (collective: every rank calls it at once)."""
        count = self.fabric.all_reduce(self.episodes.clone(), reduce_op="sum")
        return self.episodes_before + int(count)

    def _log_scalars(self) -> None:
        """The iterations since the last call, as one point of Fabric's loggers (CleanRL's names;
        ``charts/train_seconds`` for curves against wall time)."""
        records = self.window.flush(self.fabric.all_reduce if self.world_size > 1 else None)
        if not records:
            return
        now = self.clock.seconds()
        tags = [g.tag for g in self.groups]
        metrics = cleanrl_metrics(records, tags)
        metrics["charts/SPS"] = (
            self.steps_per_iteration * len(records) / max(now - self.scalars_start, 1e-9)
        )
        metrics["charts/train_seconds"] = self.scalars_start = now
        self.fabric.log_dict(metrics, step=records[-1].env_step)
        for tag in tags:
            episodes = episode_summary(records, tag)
            if episodes["episode_count"]:
                self.last_returns[tag] = episodes["reward_mean"]
        self.records.extend(records)

    def _log(self, progress, window_iterations: int, window_ms: float) -> None:
        """The window since the last text log: the folder's logs and the console."""
        records, self.records = self.records, []
        total_episodes = self._total_episodes()  # a collective, on every rank
        phase_ms = self.timer.totals_ms()
        self.timer.reset()
        if self.rank != 0 or not records:
            return
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
        shown = self.config.saving.console
        if shown == "blocks":
            progress.print(console.format_blocks(blocks, speed))
        elif shown == "compact":
            progress.print(console.compact_line(records, [g.tag for g in self.groups], speed))

    def _evaluate(self, progress) -> bool:
        """Greedy evaluation (the same episodes every time and on every rank: those of
        ``gpu-envs evaluate --episodes num_episodes --seed seed``); rank 0 logs it and keeps
        ckpt_best. Returns whether the score reached ``stop_value``."""
        result = self.evaluator.run()
        means = dict(
            zip(
                [g.tag for g in self.groups],
                torch.stack([result["returns"][g.tag].mean() for g in self.groups])
                .double()
                .tolist(),
            )
        )
        score = means[self.score_policy]
        improved = score > self.best_score
        self.best_score = max(self.best_score, score)
        if improved:
            self._save(self.experiment.ckpt_dir / "ckpt_best.pth.tar" if self.rank == 0 else None)
        eval_cfg = self.config.evaluation
        stop = eval_cfg.stop_value is not None and score >= eval_cfg.stop_value
        if self.rank == 0:
            self.experiment.log_evaluation(
                self.iteration, self.env_step, result, means, self.clock.seconds()
            )
            prefix = "" if len(self.groups) == 1 else f"{self.score_policy}/"
            self.fabric.log_dict(
                {
                    f"eval/{prefix}mean_return": score,
                    "charts/train_seconds": self.clock.seconds(),
                },
                step=self.env_step,
            )
            last_seed = eval_cfg.seed + eval_cfg.num_episodes - 1
            progress.print(
                f"[eval] iteration {self.iteration}, env step {self.env_step}: "
                f"{self.score_policy} greedy mean return {score:.2f} over "
                f"{eval_cfg.num_episodes} episodes (seeds {eval_cfg.seed}..{last_seed}), best "
                f"{self.best_score:.2f}"
                + (f" -> stop_value {eval_cfg.stop_value:g} reached" if stop else "")
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
        """Gather every rank's progress state and episode count (collectives), then rank 0
        writes ``path`` atomically."""
        ranks, total_episodes = self._gather_rank_states(), self._total_episodes()
        self.last_save = time.monotonic()
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
            self, self.config, self.nvec, continuous, counters, self.best_score, ranks
        )
        ckpt.save_checkpoint(state, path)

    def _rank_state(self) -> dict:
        """What this rank continues from: RNG states, the envs' buffers, the rollout's
        carry-over."""
        collector = self.collector
        state = {
            "torch": torch.get_rng_state(),
            "env": self.game.env.buffers_state(),
            "obs": collector.obs,
            "prev_done": collector.prev_done,
            "episode_returns": collector.episode_returns,
            "episode_lengths": collector.episode_lengths,
        }
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def _gather_rank_states(self) -> list[dict]:
        """``_rank_state`` of every rank, on the CPU (a collective under DDP)."""
        state = self._rank_state()
        if self.world_size == 1:
            return [_to_cpu(state)]
        gathered = _to_cpu(_map(self._all_gather_bytes, state))
        return [_map(lambda v, r=r: v[r], gathered) for r in range(self.world_size)]

    def _all_gather_bytes(self, tensor: torch.Tensor) -> torch.Tensor:
        """[world_size, *shape]: ``tensor`` of every rank, sent as bytes (any dtype, bool and
        uint64 included, crosses every backend)."""
        flat = tensor.detach().to(self.device).contiguous().reshape(-1).view(torch.uint8)
        gathered = self.fabric.all_gather(flat)
        return gathered.view(tensor.dtype).reshape(self.world_size, *tensor.shape)

    def _restore(self, path: Path) -> dict:
        """Load ``path``'s weights, optimiser states and counters; returns the checkpoint for
        ``_start_rollouts``."""
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
        if self.collector.opponents is not None:
            if state.get("opponents") is None:
                raise ckpt.CheckpointError(
                    f"{path} holds no opponent pool (a run with opponents.share 0); resume it "
                    "with its own config"
                )
            self.collector.opponents.load_state_dict(state["opponents"])
        if self.evaluator is not None:
            self.evaluator.evaluations = int(state["counters"]["evaluations"])
        if self.rank == 0:
            print(
                f"Resuming from {path} at iteration {self.iteration} (env step {self.env_step})",
                flush=True,
            )
        return state


def _map(function, tree):
    """``function`` applied to every tensor of a nested dict."""
    if isinstance(tree, dict):
        return {k: _map(function, v) for k, v in tree.items()}
    return function(tree)


def _to_cpu(tree):
    return _map(lambda t: t.detach().cpu().clone(), tree)


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
    trainer = Trainer(fabric, config, resume)
    try:
        return trainer.fit()
    except KeyboardInterrupt:  # a second Ctrl-C: no checkpoint now; a new run without any goes
        trainer.discard_if_empty()
        raise
