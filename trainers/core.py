"""The training core: one run's pieces and its iteration, driven by both front ends.

``TrainingRun.iterate`` is the whole training loop's body, top to bottom (CleanRL's ``ppo.py``)::

    rollout = collector.collect()                        # every env steps num_steps, on the device
    stats = ppo.learn(groups, rollout, ...)              # per policy: anneal the learning rate,
                                                         # GAE, epochs of minibatches (ppo.update);
                                                         # stop if a loss or grad norm diverged
    window.add(...)                                      # statistics stay on the device
    every eval_freq iterations: greedy evaluation        # ckpt_best.pth.tar, stop_value
    every scalars_log_freq iterations: scalars           # TensorBoard, CSV, the driver's loggers
    every metrics_log_freq iterations: log               # the folder's text logs, the console
    every model_params_save_freq iterations: save        # iteration_<N>.pth.tar; also after
                                                         # checkpoint_minutes, and on a stop request

The drivers only add what their framework needs: ``fabric_loop.Trainer`` (launch, DDP, signals,
the progress bar; ``fit`` calls ``iterate`` until it says the run ends) and
``gpu_envs.lightning.module.TagLightningModule`` (one ``iterate`` per Lightning epoch).

A checkpoint holds everything the run continues from (weights, optimiser, the envs' buffers, the
rollout's carry-over, RNG and sampler states), so an interrupted run resumed from it ends with the
same weights, bit for bit on the CPU, as one that was never stopped.

Distributed (``dist``: a launched Fabric under DDP): every rank runs its own envs (``num_envs``,
or its share of them with ``trainer.batch_scope`` global; seeds ``seed + rank * n + i``) and its
own rollout; DDP averages the gradients. The collectives (``all_reduce`` of the metrics, the
episode count and the stop requests, ``all_gather`` of the evaluation's episodes and of the per-rank
states for checkpoints, ``broadcast`` of the run folder and of the evaluation's score) happen at
iterations every rank reaches; only rank 0 writes (a rank that outlives it records the run's
failure: ``take_over_status``). Each rank plays its share of the evaluation's
episodes; the score, and with it ``stop_value`` and the best checkpoint, is rank 0's mean of all of
them, the same on every rank. A checkpoint resumes on as many processes as wrote it
(``checkpoint.rank_states`` refuses others).
"""

from __future__ import annotations

import math
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import torch

from gpu_envs.games import GAMES
from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs import checkpoint_fields as ckpt_fields
from gpu_envs.runs import console, curves, run_control
from gpu_envs.runs.config import ConfigError, RunConfig, game_of
from gpu_envs.runs.experiment import Experiment, NullExperiment, experiment_root, fresh_root
from gpu_envs.runs.metrics import cleanrl_metrics, episode_summary
from gpu_envs.runs.speed import PhaseTimer, SpeedMeter, TrainClock
from gpu_envs.trainers import learner, ppo
from gpu_envs.trainers.evaluation import (
    Evaluator,
    episode_shares,
    gather_result,
    record_video,
)
from gpu_envs.trainers.game_faces import make_game
from gpu_envs.trainers.memory_budget import check_run_memory
from gpu_envs.trainers.opponents import make_pool
from gpu_envs.trainers.played_episode import DrawnFrames, draws_frames
from gpu_envs.trainers.policy import ContinuousActions, make_network
from gpu_envs.trainers.rollout import Collector, PolicyGroup, agent_index
from gpu_envs.trainers.sampling import make_sampler
from gpu_envs.trainers.seeding import seed_everything
from gpu_envs.trainers.statistics import MetricsWindow

#: The best checkpoint's file name, in the run's ``ckpt/`` folder.
BEST = "ckpt_best.pth.tar"
#: Why ``iterate`` ends a run (None: it goes on).
REACHED, COMPLETED, STOPPED = "stop_value reached", "num_iterations reached", "stop requested"


class OneProcess:
    """The collectives of a single process (what a launched Fabric offers under DDP)."""

    global_rank, world_size = 0, 1

    @staticmethod
    def all_reduce(tensor: torch.Tensor, reduce_op: str = "sum") -> torch.Tensor:
        return tensor

    @staticmethod
    def all_gather(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.unsqueeze(0)

    @staticmethod
    def broadcast(obj, src: int = 0):
        return obj


#: ``setup(module, optimizer) -> (model to call, optimizer)``: Fabric's wrapping (DDP) of a policy.
Setup = Callable[[torch.nn.Module, torch.optim.Optimizer], tuple]


class TrainingRun:
    """PPO/A2C for every policy of ``config`` over its game on ``device``.

    Args:
        game: the trainer's game (``games.make_game``); None builds it from the config.
        agent_map: policy tag -> agent ids; None: the game's default (teams, or every agent).
        dist: the collectives (a launched Fabric); None: one process.
        setup: wraps a trained policy and its optimiser (Fabric's ``setup``); None: used as built.
        resume: a checkpoint to continue from, already read (``run_control.resolve_resume``'s),
            or None.
        log_scalars: also receives every scalars point (``metrics, env_step, records``): the
            driver's own loggers (``fabric.log_dict``, Lightning's ``self.log_dict``).
        folder_lock: the resumed folder's lock, taken already; ``open_folder`` takes a new
            folder's. Held until the run ends (``finish``, ``fail``).
    """

    def __init__(
        self,
        config: RunConfig,
        device: torch.device,
        *,
        game=None,
        agent_map: dict[str, list[int]] | None = None,
        dist=None,
        setup: Setup | None = None,
        resume: ckpt.LoadedCheckpoint | None = None,
        log_scalars: Callable | None = None,
        folder_lock: run_control.FolderLock | None = None,
    ):
        self.folder_lock = folder_lock
        self.status: str | None = None  # the last status this run wrote
        self.config, self.device = config, device
        tc = config.trainer
        self.dist = dist or OneProcess()
        self.rank, self.world_size = self.dist.global_rank, self.dist.world_size
        self.num_envs = tc.envs_per_rank(self.world_size)  # this rank's
        # before anything large is allocated or written: refused if the run does not fit
        check_run_memory(config, device, self.world_size, self.rank, game, agent_map)
        self.game = game or make_game(config.name, self.num_envs, device, config.env)
        self.nvec = self.game.action_nvec
        agent_map = agent_map or self.game.default_agent_map(list(config.policy))
        seed_everything(tc.seed)  # the same initial weights on every rank
        self.groups = [self._make_group(tag, agent_map[tag], setup) for tag in config.policy]
        seed_everything(tc.seed + self.rank)  # then each rank samples its own
        self.timer = PhaseTimer(device)
        self.clock = TrainClock()
        # training seconds at the end of the last update, before the last logs, save and plot
        self.update_seconds: float | None = None
        self.speed = SpeedMeter(self.timer, self.clock)
        self.sampler = make_sampler(tc.action_sampler, tc.seed + self.rank, device)
        self.collector = Collector(
            self.game,
            self.groups,
            tc.num_steps,
            self.sampler,
            self.timer,
            # the same draws on every rank: one pool state for the checkpoint
            make_pool(self.groups, config.opponents, self.num_envs, tc.seed),
            cuda_graphs=tc.cuda_graphs,
            reward_shaping=tc.reward_shaping,
        )
        eval_cfg = config.evaluation
        self.evaluator = None
        if eval_cfg.eval_freq:  # each rank plays its share of the episodes
            self.eval_shares = episode_shares(eval_cfg.num_episodes, self.world_size)
            first = sum(self.eval_shares[: self.rank])
            eval_game = make_game(config.name, self.eval_shares[self.rank], device, config.env)
            self.evaluator = Evaluator(eval_game, self.groups, eval_cfg.seed, first)
        self.score_policy = eval_cfg.score_policy or next(iter(config.policy))

        total = tc.total_timesteps or tc.num_episodes * self.game.episode_length
        self.steps_per_iteration = tc.num_steps * self.num_envs * self.world_size
        self.num_iterations = max(1, total // self.steps_per_iteration)
        self.iteration = 0
        self.env_step = 0  # every rank's
        self.episodes = torch.zeros((), dtype=torch.int64, device=device)  # this rank's
        self.episodes_before = 0  # every rank's, before a resume
        self.agent_steps = 0.0  # every rank's, as far as the scalars have been read
        self.best_score = -math.inf
        self.stop_signal: str | None = None  # the signal that stopped the run, agreed by the ranks
        self.window = MetricsWindow([g.tag for g in self.groups], len(self.nvec))
        self.records: list = []  # the host records since the last text log (metrics_log_freq)
        self.last_returns: dict[str, float] = {}  # each policy's latest mean episode return
        self.log_scalars_to = log_scalars
        self.say: Callable[[str], None] = print  # the console (a driver may route it)
        self.console = config.saving.console  # compact | blocks | none (a driver may choose)
        self.speed_in_blocks = True  # "blocks" ends with the speed block (else a callback's)
        self.video_game = None
        self.resumed_from = None if resume is None else resume.path
        self._resume_state = None if resume is None else self._restore(resume)
        if self.iteration >= self.num_iterations:  # (refused before the folder is touched)
            raise ckpt.CheckpointError(
                f"--resume: {self.resumed_from} is at the run's last iteration "
                f"({self.iteration} of {self.num_iterations}); there is nothing left to train: "
                f"give a longer run (--total-timesteps more than {self.env_step})"
            )
        self.root: Path = experiment_root(config)
        self.experiment: Experiment | NullExperiment = NullExperiment()

    def _make_group(self, tag: str, agent_ids: list[int], setup: Setup | None) -> PolicyGroup:
        cfg = self.config.policy[tag]
        module = make_network(self.game.obs_dim, self.nvec, cfg, tag).to(self.device)
        agents = agent_index(agent_ids, self.device)
        if not cfg.to_train:
            return PolicyGroup(tag, cfg, module, module, None, agents, len(agent_ids))
        optimizer = learner.make_optimizer(module, cfg, self.device)
        model = module
        if setup is not None:
            model, optimizer = setup(module, optimizer)
            if self.world_size == 1:
                # One process, 32-bit: Fabric's wrapper would only add per-call overhead to the
                # training forward passes; with DDP the wrapper's forward is what syncs gradients.
                model = module
        return PolicyGroup(tag, cfg, model, module, optimizer, agents, len(agent_ids))

    # ------------------------------------------------------------------------------ start, stop
    def open_folder(self, root: Path | None = None) -> None:
        """Rank 0 opens the experiment folder, locked (``run_control.FolderLock``): ``root`` (a
        resumed run's), else a new one, after marking the dead runs beside it ``crashed``; a new
        folder that fails to open is removed."""
        created = root is None and self.rank == 0
        if root is None:
            root = experiment_root(self.config)
            if created:
                root = fresh_root(root)
        try:
            if created:
                run_control.mark_crashed_runs(root.parent)
            self.root = Path(self.dist.broadcast(str(root), 0))  # rank 0's, on every rank
            if self.rank == 0:
                if self.folder_lock is None:  # a new folder, or one a checkpoint elsewhere names
                    root.mkdir(parents=True, exist_ok=True)
                    self.folder_lock = run_control.FolderLock(root)
                self.experiment = Experiment(root, self.config)
        except BaseException:
            if created:  # (a full disk, say): no folder is left half made
                shutil.rmtree(root, ignore_errors=True)
            raise

    def compile_steps(self, backward: Callable) -> None:
        """Every policy's gradient step (compiled with ``trainer.compile``)."""
        learner.make_steps(
            self.groups,
            backward,
            self.collector.buffers,
            self.nvec,
            compile=self.config.trainer.compile,
            fuse=self.world_size == 1,  # DDP's gradient hooks need the module's own backward
        )

    def start(self) -> None:
        """Compile the env's and the sampler's kernels (before the clock), reset or restore the
        envs, and start the clock."""
        self.collector.warm_up()
        if self.evaluator is not None:
            self.evaluator.game.reset(0)
        self._start_rollouts()
        if self.evaluator is not None and self.resumed_from is not None:
            self.best_score = max(self.best_score, self._best_on_disk())
        self.experiment.log_models({g.tag: g.module for g in self.groups})
        self.experiment.open_writers()
        self._set_status("running")
        self.clock.start()
        self.log_mark = self.scalars_mark = self.speed.mark(self.iteration, self.agent_steps)
        self.last_save = time.monotonic()

    def iterate(
        self, stop_requested: Callable[[], str | None] | None = None, last: bool | None = None
    ) -> str | None:
        """One iteration and what is due after it; returns why the run ends now (``REACHED``,
        ``COMPLETED``, ``STOPPED``) or None. ``stop_requested()``, asked after the update: the
        signal (``"SIGINT"``, ``"SIGTERM"``) that asked this rank to stop, or None; every rank then
        stops here, ``stop_signal`` naming it (SIGTERM when ranks got different ones); ``last``:
        the driver ends the run here (default: at ``num_iterations``)."""
        saving, eval_cfg = self.config.saving, self.config.evaluation
        self.iteration += 1
        rollout = self.collector.collect()
        with self.timer.phase("training"):
            stats = ppo.learn(self.groups, rollout, self.iteration, self.num_iterations)
        self.env_step += self.steps_per_iteration
        self.episodes += self.collector.env_done.sum()
        self.window.add(self.iteration, self.env_step, stats, self.collector)

        last = self.iteration >= self.num_iterations if last is None else last
        evaluate = self.evaluator is not None and (self.iteration % eval_cfg.eval_freq == 0 or last)
        if last or evaluate:  # the run may end here: its training time ends with this update
            if self.device.type == "cuda":  # (the update's kernels have run)
                torch.cuda.synchronize(self.device)
            update_end = self.clock.seconds()
        reached = False
        if evaluate:
            with self.clock.paused():
                reached = self._evaluate()
        if last or reached:
            self.update_seconds = update_end
        asked = stop_requested() if stop_requested is not None else None
        number, overdue = self._agree(
            signal.Signals[asked].value if asked else 0, int(self._checkpoint_overdue())
        )
        stopped = number > 0
        if stopped:
            self.stop_signal = signal.Signals(number).name
        end = last or reached or stopped
        if self.iteration % saving.scalars_log_freq == 0 or end:
            self._log_scalars()
        if self.iteration % saving.metrics_log_freq == 0 or end:
            self._log()
        if self.iteration % saving.model_params_save_freq == 0 or end or overdue:
            path = ckpt.iteration_path(self.experiment.ckpt_dir or ".", self.iteration)
            self.save(path)
            if self.rank == 0:
                ckpt.prune_checkpoints(path.parent, saving.keep_last, path)
        if reached:
            return REACHED
        if last:
            return COMPLETED
        return STOPPED if stopped else None

    def finish(self, why: str) -> dict:
        """Record how the run ended (status file, curves.png), close the folder; a summary."""
        self.experiment.close()
        status = "interrupted" if why == STOPPED else "finished"
        reason = (self.stop_signal or "stop requested") if why == STOPPED else why
        self._set_status(status, reason=reason)
        if self.rank == 0:
            curves.write_run_curves(self.root)
        self.release_folder()
        summary = {
            "status": status,
            "reason": reason,
            "iterations": self.iteration,
            "num_iterations": self.num_iterations,
            "env_steps": self.env_step,
            "best_eval": self.best_score,
            "train_seconds": self.clock.seconds(),
            # to the end of the last update (the final save and plot excluded); None if stopped
            "update_seconds": self.update_seconds,
            "experiment": str(self.experiment.root),
            "checkpoint": str(ckpt.iteration_path(self.root / "ckpt", self.iteration)),
        }
        if status == "interrupted":
            summary["resume_command"] = run_control.resume_command(self.root)
        best = self.root / "ckpt" / BEST
        if self.evaluator is not None and self.game.num_agents == 1:
            eval_cfg = self.config.evaluation
            summary["evaluate_command"] = (
                f"gpu-envs evaluate {self.config.game} {best}"
                f" --episodes {eval_cfg.num_episodes} --seed {eval_cfg.seed}"
            )
        elif self.config.game == "tag":  # the teams against random ones (its own report)
            scored = best if best.is_file() else summary["checkpoint"]
            summary["matchups_command"] = f"gpu-envs evaluate tag {scored} --episodes 100 --seed 0"
        return summary

    def fail(self, error: BaseException) -> None:
        """Record a run that ``error`` ends (``aborted`` for a Ctrl-C, else ``failed``) unless its
        status says how it ended already, and unlock its folder."""
        if self.status == "running":
            status = "aborted" if isinstance(error, KeyboardInterrupt) else "failed"
            self._set_status(status, reason=f"{type(error).__name__}: {error}".removesuffix(": "))
        self.release_folder()

    def take_over_status(self, wait_s: float) -> bool:
        """On a rank other than 0, after rank 0 ended without recording how the run ended (the run
        folder is here, on a shared filesystem, its status says ``running`` and its lock is free,
        ``run_control.claim_if_orphaned``, waiting up to ``wait_s`` seconds): hold the folder's
        lock, and write the status from now on (``fail``). Returns whether it did."""
        if self.rank == 0 or self.status != "running" or self.folder_lock is not None:
            return False
        self.folder_lock = run_control.claim_if_orphaned(self.root, wait_s)
        return self.folder_lock is not None

    def release_folder(self) -> None:
        """Unlock the folder: another run may write it now."""
        if self.folder_lock is not None:
            self.folder_lock.release()

    def discard_if_empty(self) -> None:
        """Delete the folder of a new run that saved no checkpoint (nothing to resume there)."""
        if (
            self.rank == 0
            and self.resumed_from is None
            and not ckpt.iteration_checkpoints(self.root / "ckpt")
        ):
            shutil.rmtree(self.root, ignore_errors=True)

    def _set_status(self, status: str, **details) -> None:
        self.status = status
        if self.rank == 0 or self.folder_lock is not None:  # (another rank: ``take_over_status``)
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

    def _agree(self, *values: int) -> tuple[int, ...]:
        """Each value's largest over the ranks (a collective under DDP: every rank stops and saves
        at the same iteration, knowing why)."""
        if self.world_size == 1:
            return values
        tensor = torch.tensor(values, dtype=torch.int32, device=self.device)
        return tuple(int(v) for v in self.dist.all_reduce(tensor, reduce_op="max").tolist())

    def _start_rollouts(self) -> None:
        """A new run resets the envs; a resumed one puts back the saved envs, rollout carry-over,
        RNG and sampler states (after the warm-up, which draws from them)."""
        tc, state = self.config.trainer, self._resume_state
        if state is None:
            self.collector.reset(tc.seed + self.rank * self.num_envs)
            return
        mine = state["rng"][self.rank]  # one entry per process, RNG states checked and copied
        if "env" not in mine:
            self.collector.reset(tc.seed + self.rank * self.num_envs)
            if self.rank == 0:
                self.say(
                    "The checkpoint holds no env state: the envs start new episodes (the run "
                    "continues, not bit for bit)"
                )
        self.sampler.load_state_dict(state["sampler"])
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

    # ------------------------------------------------------------------------------ logging
    def _total_episodes(self) -> int:
        """Episodes ended on every rank so far (collective: every rank calls it at once)."""
        count = self.dist.all_reduce(self.episodes.clone(), reduce_op="sum")
        return self.episodes_before + int(count)

    def _log_scalars(self) -> None:
        """The iterations since the last call, as one point of the folder's loggers and the
        driver's (CleanRL's names; ``charts/train_seconds`` for curves against wall time)."""
        records = self.window.flush(self.dist.all_reduce if self.world_size > 1 else None)
        if not records:
            return
        tags = [g.tag for g in self.groups]
        self.agent_steps += sum(p["agentstep_count"] for r in records for p in r.policies.values())
        mark = self.speed.mark(self.iteration, self.agent_steps)
        metrics = cleanrl_metrics(records, tags)
        metrics["charts/SPS"] = self.speed.env_steps_per_second(
            self.scalars_mark, mark, self.steps_per_iteration
        )
        metrics["charts/train_seconds"] = mark.seconds
        self.scalars_mark = mark
        self._send_scalars(metrics, records)
        for tag in tags:
            episodes = episode_summary(records, tag)
            if episodes["episode_count"]:
                self.last_returns[tag] = episodes["reward_mean"]
        self.records.extend(records)

    def _send_scalars(self, metrics: dict, records: list) -> None:
        step = self.env_step
        for logger in self.experiment.loggers:
            logger.log_metrics(metrics, step=step)
        if self.log_scalars_to is not None:
            self.log_scalars_to(metrics, step, records)

    def _log(self) -> None:
        """The window since the last text log: the folder's logs and the console."""
        records, self.records = self.records, []
        total_episodes = self._total_episodes()  # a collective, on every rank
        mark = self.speed.mark(self.iteration, self.agent_steps)
        speed = self.speed.block(self.log_mark, mark, self.num_iterations, self.steps_per_iteration)
        collect_seconds = self.speed.collect_seconds(self.log_mark, mark)
        self.log_mark = mark
        if self.rank != 0 or not records:
            return
        blocks = {g.tag: console.policy_block(g, records, len(self.nvec)) for g in self.groups}
        self.experiment.log_window(
            records,
            blocks,
            speed,
            self.steps_per_iteration * len(records),
            collect_seconds=collect_seconds,
            total_episodes=total_episodes,
            train_seconds=mark.seconds,
        )
        if self.console == "blocks":
            self.say(console.format_blocks(blocks, speed if self.speed_in_blocks else None))
        elif self.console == "compact":
            self.say(console.compact_line(records, [g.tag for g in self.groups], speed))

    # ------------------------------------------------------------------------------ evaluation
    def _best_on_disk(self) -> float:
        """The score of the run folder's ``ckpt_best.pth.tar`` (rank 0's read, on every rank): a
        resume from an older checkpoint replaces it only with a better one."""
        best = -math.inf
        if self.rank == 0 and self.experiment.ckpt_dir is not None:
            best = ckpt.recorded_best(self.experiment.ckpt_dir / BEST)
        return float(self.dist.broadcast(best, 0))

    def _evaluate(self) -> bool:
        """Greedy evaluation (the same episodes every time: those of ``gpu-envs evaluate
        --episodes num_episodes --seed seed``, each rank playing its share); rank 0 logs it and
        keeps ckpt_best. Returns whether the score reached ``stop_value``: one decision, rank 0's
        means broadcast, so that every rank saves and stops at the same iteration."""
        assert self.evaluator is not None
        result = self.evaluator.run()
        if self.world_size > 1:
            result = gather_result(result, self.dist.all_gather, self.eval_shares)
        tags = [g.tag for g in self.groups]
        returns = torch.stack([result["returns"][tag].mean() for tag in tags])
        means = self.dist.broadcast(dict(zip(tags, returns.double().tolist())), 0)
        score = means[self.score_policy]
        improved = score > self.best_score
        self.best_score = max(self.best_score, score)
        if improved:  # rank 0 writes it; the other ranks join save's collectives
            path = None
            if self.rank == 0:
                assert self.experiment.ckpt_dir is not None  # (rank 0 opened the folder)
                path = self.experiment.ckpt_dir / BEST
            self.save(path)
        eval_cfg = self.config.evaluation
        stop = eval_cfg.stop_value is not None and score >= eval_cfg.stop_value
        if self.rank != 0:
            return stop
        seconds = self.clock.seconds()
        written = BEST if improved else "none (not a new best)"  # this iteration's is saved later
        self.experiment.log_evaluation(
            self.iteration, self.env_step, result, means, seconds, ckpt_name=written
        )
        prefix = "" if len(self.groups) == 1 else f"{self.score_policy}/"
        self._send_scalars(
            {f"eval/{prefix}mean_return": score, "charts/train_seconds": seconds}, []
        )
        last_seed = eval_cfg.seed + eval_cfg.num_episodes - 1
        self.say(
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
        if self.video_game is None:  # frames the env draws, else drawn from its observations
            record = GAMES[game_of(self.config.name)]
            own_frames = draws_frames(record)
            game = make_game(
                self.config.name,
                1,
                self.device,
                self.config.env,
                render_mode="rgb_array" if own_frames else None,
            )
            self.video_game = game if own_frames else DrawnFrames(game, record)
        folder = self.experiment.video_dir
        assert folder is not None  # (rank 0 records)
        path = record_video(self.video_game, self.groups, folder / f"iteration_{self.iteration}")
        self.say(f"[video] {path}")

    # ------------------------------------------------------------------------------ checkpoints
    def save(self, path: Path | None) -> None:
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
        if self.console == "blocks":  # the original framework's line
            self.say(f"[{self.device}]: Saving the checkpoint to the file '{path}'")

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
        """``_rank_state`` of every rank, on the CPU (a collective under DDP). Each rank's tensors
        are copies of their own, not slices of the gathered ones: ``torch.set_rng_state`` crashes
        on a tensor at a storage offset."""
        state = self._rank_state()
        if self.world_size == 1:
            return [_to_cpu(state)]
        gathered = _map(self._all_gather_bytes, state)
        return [_to_cpu(_map(lambda v, r=r: v[r], gathered)) for r in range(self.world_size)]

    def _all_gather_bytes(self, tensor: torch.Tensor) -> torch.Tensor:
        """[world_size, *shape]: ``tensor`` of every rank, sent as bytes (any dtype, bool and
        uint64 included, crosses every backend)."""
        flat = tensor.detach().to(self.device).contiguous().reshape(-1).view(torch.uint8)
        gathered = self.dist.all_gather(flat)
        return gathered.view(tensor.dtype).reshape(self.world_size, *tensor.shape)

    def _generators(self) -> dict[str, torch.Tensor]:
        """This process's state of each generator a checkpoint restores."""
        generators = {"torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            generators["cuda"] = torch.cuda.get_rng_state(self.device)
        return generators

    def _check_checkpoint(self, state: dict, path: Path) -> None:
        """Raise ``CheckpointError``, before anything is restored, unless this run can restore
        ``state`` (the checkpoint at ``path``): the same networks (``check_compatible``) and number
        of processes (``rank_states``), then every field's type, shape, dtype and range
        (``checkpoint_fields.training_spec``), and the run config a resume keeps. Every rank checks
        every rank's states, so that all refuse together, before any collective (a rank that
        failed alone later would leave the others waiting)."""
        ckpt.check_compatible(
            state,
            path,
            self.game.obs_dim,
            self.nvec,
            {g.tag: g.module for g in self.groups},
            {g.tag: self.config.policy[g.tag].model for g in self.groups},
        )
        ckpt.rank_states(state, path, self.world_size, self._generators())
        env = self.game.env.buffers_state()
        obs_dtype = env["obs"].dtype if "obs" in env else torch.float32
        rank = {
            **self._generators(),
            "env": env,
            "obs": torch.empty(
                (self.num_envs, self.game.num_agents, self.game.obs_dim), dtype=obs_dtype
            ),
            "prev_done": self.collector.prev_done,
            "episode_returns": self.collector.episode_returns,
            "episode_lengths": self.collector.episode_lengths,
        }
        pool = self.collector.opponents
        if pool is not None and state.get("opponents") is None:
            raise ckpt.CheckpointError(
                f"{path} holds no opponent pool (a run with opponents.share 0); resume it with "
                "its own config"
            )
        spec = ckpt_fields.training_spec(
            spaces={
                "obs_dim": self.game.obs_dim,
                "action_nvec": list(self.nvec),
                "continuous": isinstance(self.nvec, ContinuousActions),
            },
            models={g.tag: g.module.state_dict() for g in self.groups},
            optimizers={g.tag: _unwrapped(g.optimizer) for g in self.groups},
            rank=rank,
            world_size=self.world_size,
            pool=None if pool is None else pool.state_dict(),
            pool_size=self.config.opponents.pool_size,
        )
        ckpt_fields.check(state, path, spec)
        try:  # as resolve_resume checks the checkpoint it read (a fallback's has not been)
            saved = RunConfig.from_dict(state["config"])
        except ConfigError:
            return  # a config this version no longer reads: the checks above remain
        ckpt.check_resume_config(saved, self.config, path)

    def _restore(self, loaded: ckpt.LoadedCheckpoint) -> dict:
        """Put back the weights, optimiser states and counters of ``loaded`` (read by
        ``resolve_resume``) once ``_check_checkpoint`` accepts it, or of the older checkpoint of
        its folder that ``checkpoint_fields.restorable`` falls back to; returns its state for
        ``_start_rollouts``."""
        say = self.say if self.rank == 0 else lambda line: None  # (every rank checks)
        path, state, _ = ckpt_fields.restorable(loaded, self._check_checkpoint, say)
        self.resumed_from = path
        state["rng"] = ckpt.rank_states(state, path, self.world_size, self._generators())
        for group in self.groups:
            saved = state["policies"][group.tag]
            group.module.load_state_dict(saved["model"])
            if group.optimizer is not None and saved.get("optimizer") is not None:
                group.optimizer.load_state_dict(saved["optimizer"])
                for param_group in group.optimizer.param_groups:  # this run's, not the saved one
                    param_group["eps"] = group.config.adam_eps
        self.iteration, self.env_step = int(state["iteration"]), int(state["env_step"])
        self.episodes_before = int(state["counters"]["total_episodes"])
        self.clock.previous = float(state["counters"]["train_seconds"])
        self.best_score = float(state["best_eval"])
        if self.collector.opponents is not None:
            self.collector.opponents.load_state_dict(state["opponents"])
        if self.evaluator is not None:
            self.evaluator.evaluations = int(state["counters"]["evaluations"])
        if self.rank == 0:
            self.say(
                f"Resuming from {path} at iteration {self.iteration} (env step {self.env_step})"
            )
        return state


def _map(function, tree):
    """``function`` applied to every tensor of a nested dict."""
    if isinstance(tree, dict):
        return {k: _map(function, v) for k, v in tree.items()}
    return function(tree)


def _unwrapped(optimizer):
    """The optimiser Fabric or Lightning wraps (None stays None)."""
    return getattr(optimizer, "optimizer", optimizer)


def _to_cpu(tree):
    return _map(lambda t: t.detach().cpu().clone(), tree)
