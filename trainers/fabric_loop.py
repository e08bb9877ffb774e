"""The Fabric driver: ``gpu-envs train``'s trainer, on one process or many (DDP).

``Trainer.fit`` is the training loop: ``core.TrainingRun.iterate`` (rollout, learning, evaluation,
logs, checkpoints) until it says the run ends, with SIGINT/SIGTERM asking it to save and stop and
the progress on the console. Fabric adds the launch (``make_fabric``: devices, nodes, strategy with
``trainer.collective_timeout``; ``fabric run``, ``torchrun`` and SLURM too), the DDP wrapping of
every trained policy, its collectives and its loggers; one process on the CPU runs without it
(``LocalProcess``: Lightning is not even imported).

Under DDP a rank that dies or hangs fails the run on the others: their next collective fails (at
once under gloo when a peer's process is gone, after ``trainer.collective_timeout`` when it hangs)
and each survivor stops with a ``RankFailure`` naming the rank when it knows it (rank 0 of a run
Fabric launched watches the processes it started), the last checkpoint and the resume command;
rank 0 records the run ``failed``, or, when rank 0 is the rank that died, the survivors do where
they see the run folder (one machine, or a shared filesystem: ``TrainingRun.take_over_status``).
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import subprocess
import threading
import time
from datetime import timedelta
from pathlib import Path

import numba
import torch

from gpu_envs.runs import checkpoint as ckpt
from gpu_envs.runs import console, run_control
from gpu_envs.runs.config import RunConfig, TrainerConfig
from gpu_envs.trainers import learner
from gpu_envs.trainers.core import OneProcess, TrainingRun


class RankFailure(RuntimeError):
    """A multi-process run stopped because another rank died or did not answer in time."""


#: How long a rank whose collective failed waits for rank 0's lock of the run folder to be free
#: (``TrainingRun.take_over_status``): a dead process's connections close a moment before its
#: files (a GPU's teardown in between), and a live rank 0 records the failure itself meanwhile.
RANK0_GONE_WAIT_S = 5.0


#: Variables of the launchers that start ranks (``fabric run``, torchrun, SLURM, MPI): where one is
#: set, Fabric reads the run's processes from them.
LAUNCHER_VARIABLES = (
    "LT_CLI_USED",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
)


class LocalProcess(OneProcess):
    """What the trainer takes from a launched Fabric, for one process on the CPU: the device, rank
    0 of 1, the policies used as built (Fabric's ``setup`` unwraps them there too), plain
    ``backward``, no loggers but the folder's. Lightning is not imported: 2-3 s of the start of
    ``gpu-envs train``'s main job (torch._dynamo, torchmetrics)."""

    node_rank = 0
    strategy = None
    loggers: list = []
    device = torch.device("cpu")

    @staticmethod
    def setup(module: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple:
        return module, optimizer

    @staticmethod
    def backward(loss: torch.Tensor) -> None:
        loss.backward()


def one_cpu_process(config: RunConfig) -> bool:
    """Whether ``config`` runs as this one process on the CPU, no launcher around it: what
    ``LocalProcess`` serves (Fabric would run its single-device strategy on the CPU)."""
    tc = config.trainer
    if any(name in os.environ for name in LAUNCHER_VARIABLES):
        return False
    if tc.strategy.lower() != "auto" or tc.num_nodes != 1 or _processes(tc) != 1:
        return False
    return tc.accelerator == "cpu" or (
        tc.accelerator == "auto"
        and not torch.cuda.is_available()
        and not torch.backends.mps.is_available()
    )


def make_fabric(config: RunConfig):
    """A launched ``lightning.fabric.Fabric`` from the trainer section (``fabric run``'s flags
    win), its DDP strategy waiting ``trainer.collective_timeout`` in a collective."""
    from lightning.fabric import Fabric
    from lightning.fabric.plugins import Precision

    tc = config.trainer
    if os.environ.get("LT_CLI_USED") == "1":
        # `fabric run` created the processes; Fabric() joins them (no launch()). Its --strategy
        # becomes a strategy object carrying the timeout (Fabric refuses both at once).
        name = os.environ.pop("LT_STRATEGY", "auto")
        processes = int(os.environ.get("WORLD_SIZE", "1"))
        fabric = Fabric(strategy=_strategy(name, processes, tc.collective_timeout))
    else:
        accelerator = "cuda" if tc.accelerator == "gpu" else tc.accelerator
        fabric = Fabric(
            accelerator=accelerator,
            devices=tc.devices,
            strategy=_strategy(tc.strategy, _processes(tc), tc.collective_timeout),
            num_nodes=tc.num_nodes,
        )
        with _children_reported(tc.collective_timeout):
            fabric.launch()
    if type(fabric.strategy.precision) is not Precision:
        raise ValueError(
            f"the trainers run in 32-bit precision (fabric run --precision 32-true), got "
            f"{type(fabric.strategy.precision).__name__}"
        )
    return fabric


def _processes(tc: TrainerConfig) -> int:
    """How many processes Fabric will run for ``tc`` (``WORLD_SIZE`` when a launcher set it)."""
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    if isinstance(tc.devices, int):
        devices = tc.devices
    else:  # "auto": every GPU, or one CPU process
        gpus = tc.accelerator != "cpu" and torch.cuda.is_available()
        devices = torch.cuda.device_count() if gpus else 1
    return devices * tc.num_nodes


def _strategy(name: str, processes: int, timeout_s: float):
    """Fabric's strategy ``name`` (``auto`` is ``ddp`` on several processes), a DDP one built
    here with the collective ``timeout_s``; other strategies by name, as Fabric builds them."""
    from lightning.fabric.strategies import STRATEGY_REGISTRY, DDPStrategy

    name = name.lower()
    if name == "auto" and processes > 1:
        name = "ddp"
    if name not in STRATEGY_REGISTRY or not issubclass(
        STRATEGY_REGISTRY[name]["strategy"], DDPStrategy
    ):
        return name
    entry = STRATEGY_REGISTRY[name]  # (the registry's get() builds the strategy: not that)
    return entry["strategy"](**entry["init_params"], timeout=timedelta(seconds=timeout_s))


@contextlib.contextmanager
def _children_reported(timeout_s: float):
    """While Fabric launches: its watcher of the processes it starts SIGKILLs rank 0 within 5 s of
    one of them dying, before rank 0 could say which and record the run ``failed``. It gets
    ``_LastResort`` instead, which leaves rank 0 that time (its collectives fail at once under gloo,
    after ``timeout_s`` otherwise) and kills the processes only past it."""
    from lightning.fabric.strategies.launchers import subprocess_script

    original = getattr(subprocess_script, "_launch_process_observer", None)
    if original is None:  # another Lightning: its own watcher stays
        yield
        return
    subprocess_script._launch_process_observer = lambda child_processes: _LastResort(
        child_processes, timeout_s + 60.0
    ).start()
    try:
        yield
    finally:
        subprocess_script._launch_process_observer = original


class _LastResort(threading.Thread):
    """Rank 0's watcher of the processes Fabric started: ``grace`` seconds after one fails, it
    kills them all and rank 0 (Lightning's protection against a rank 0 stuck forever), unless rank
    0 has ended first, as it does when it reports the failure."""

    def __init__(self, procs: list[subprocess.Popen], grace: float):
        super().__init__(daemon=True, name="gpu-envs-rank-watch")
        self.procs, self.grace = procs, grace

    def run(self) -> None:
        while True:
            time.sleep(1.0)
            codes = [proc.poll() for proc in self.procs]
            if all(code == 0 for code in codes):
                return
            if any(codes):
                break
        time.sleep(self.grace)
        for proc in self.procs:
            proc.kill()
        os.kill(os.getpid(), signal.SIGKILL)


def set_threads(torch_threads: int, local_processes: int) -> int:
    """Each rank's share of the CPUs this process may use: the CPUs divided by the processes on
    its node (at least 1) caps numba's threads (the envs' kernels) and is torch's unless
    ``torch_threads`` is given. Returns torch's threads."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    share = max(1, (cpus or 1) // max(1, local_processes))
    numba.set_num_threads(min(share, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    torch.set_num_threads(torch_threads or share)
    return torch.get_num_threads()


class Trainer(TrainingRun):
    """PPO/A2C for every policy of ``config`` over its game, on ``fabric``.

    ``resume``: see ``run_control.resolve_resume``. Metrics go to the experiment folder's loggers
    (rank 0) and to any logger the caller gave the Fabric. Rank 0 locks the run folder
    (``run_control.FolderLock``) until the run ends: a resumed one before any work, so that a
    second run of the folder is refused at once.
    """

    def __init__(self, fabric, config: RunConfig, resume=None):
        self.fabric = fabric
        writer = fabric.global_rank == 0
        loaded, root = run_control.resolve_resume(config, resume, mark_crashed=writer)
        resumed = loaded is not None
        # a resumed folder is locked before any work (one still to create, by ``open_folder``)
        lock = run_control.FolderLock(root) if resumed and writer and root.is_dir() else None
        try:
            super().__init__(
                config,
                fabric.device,
                dist=fabric,
                setup=fabric.setup,
                resume=loaded,
                log_scalars=self._log_to_fabric if fabric.loggers else None,
                folder_lock=lock,
            )
            self.open_folder(root if resumed else None)
            try:
                if self.rank == 0:  # before compiling: a run says what it is
                    print(console.banner(self), flush=True)
                self.compile_steps(fabric.backward)
            except BaseException:
                self.discard_if_empty()  # a new run that could not start leaves no folder
                raise
        except BaseException:
            self.release_folder()
            raise

    def _log_to_fabric(self, metrics: dict, step: int, records: list) -> None:
        self.fabric.log_dict(metrics, step=step)

    def fit(self) -> dict:
        """Train until ``num_iterations``, until the evaluation reaches ``stop_value``, or until
        SIGINT/SIGTERM on any rank (then save and return; the summary's ``status`` says which,
        its ``reason`` the signal). A run that an exception ends (a second Ctrl-C, an error) is
        marked ``aborted`` or ``failed``; a collective that fails because another rank died or
        hung raises ``RankFailure``."""
        try:
            self.start()
            progress = console.Progress(
                self.num_iterations,
                self.iteration,
                self.config.trainer.progress_bar and self.rank == 0,
                self.config.saving.progress_seconds,
                self.env_step,
            )
            self.say = progress.print if self.rank == 0 else _silent
            why = None
            with run_control.StopRequest(self.say) as stop_request:
                try:
                    while why is None:
                        why = self.iterate(lambda: self._stop_asked(stop_request))
                        progress.advance(self.iteration, self.env_step, self.last_returns)
                except BaseException as error:
                    failure = self._rank_failure(error)
                    self.fail(failure or error)  # while the StopRequest holds off another Ctrl-C
                    if failure is not None:
                        raise failure from error
                    raise
                finally:
                    progress.close()
                    self.experiment.close()
                stop_request.finishing = True
                return self.finish(why)  # (the status and curves.png, signals only noted)
        except BaseException as error:
            self.fail(error)  # in start() or finish(): nothing once the status says how it ended
            raise

    def _stop_asked(self, stop_request: run_control.StopRequest) -> str | None:
        """The signal that asked this rank to stop, or None. When one did, or when the update
        that ends the run is done (``iterate`` set ``update_seconds``), the run's final save
        follows: from then on signals are only noted (``StopRequest.finishing``), so that the
        save, the status and curves.png complete."""
        if stop_request.signal_name is not None or self.update_seconds is not None:
            stop_request.finishing = True
        return stop_request.signal_name

    def _rank_failure(self, error: BaseException) -> RankFailure | None:
        """A ``RankFailure`` for ``error`` when it is a collective of a multi-process run that
        failed (another rank died, or did not answer within ``trainer.collective_timeout``)."""
        if self.world_size == 1 or not _collective_failed(error):
            return None
        timeout = self.config.trainer.collective_timeout
        if self.take_over_status(RANK0_GONE_WAIT_S):
            who = "rank 0 ended (it left the run folder unlocked and its status running)"
        else:
            who = "; ".join(self._launched_ranks()) or (
                f"a rank did not answer within trainer.collective_timeout ({timeout:g} s)"
                if "timed out" in str(error).lower() or "timeout" in str(error).lower()
                else "another rank ended or lost its connection"
            )
        saved = ckpt.iteration_checkpoints(self.root / "ckpt")
        last = saved[0] if saved else self.resumed_from
        then = (
            f"the last checkpoint is {last}; resume with: {run_control.resume_command(self.root)}"
            if last is not None
            else "no checkpoint was saved: start the run again"
        )
        lines = str(error).strip().splitlines() or [""]
        cause = re.sub(r"^\[[^\]]*\]\s*", "", lines[0])[:300]  # without gloo's source file
        return RankFailure(
            f"rank {self.rank} of {self.world_size} stopped during iteration {self.iteration}: "
            f"{who} ({type(error).__name__}: {cause}); {then}"
        )

    def _launched_ranks(self) -> list[str]:
        """What is known of the ranks this process launched (rank 0 of a run Fabric started on
        one node): those that ended or are stopped. Waits up to a second for a dead one to be
        seen (its connections close as it dies, a moment before it has ended)."""
        procs = getattr(getattr(self.fabric.strategy, "launcher", None), "procs", None) or []
        local = getattr(self.fabric.strategy, "num_processes", len(procs) + 1)
        first = self.fabric.node_rank * local + 1
        for _ in range(10):
            found = [
                f"rank {first + i} (process {proc.pid}) {state}"
                for i, proc in enumerate(procs)
                if (state := _process_state(proc)) is not None
            ]
            if found or not procs:
                return found
            time.sleep(0.1)
        return []


def _collective_failed(error: BaseException) -> bool:
    """Whether ``error`` comes from a torch.distributed collective or its backend (gloo, NCCL)."""
    if isinstance(error, torch.distributed.DistError):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(
        word in text for word in ("gloo", "nccl", "connection closed by peer", "timed out waiting")
    )


def _process_state(proc: subprocess.Popen) -> str | None:
    """How process ``proc`` failed (ended by a signal or with an error code, or stopped), or None
    while it runs or once it ended well."""
    code = proc.poll()
    if code is None:
        try:
            stat = Path(f"/proc/{proc.pid}/stat").read_text(encoding="ascii")
        except OSError:
            return None
        stopped = stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")
        return "is stopped (SIGSTOP, or a debugger)" if stopped else None
    if code < 0:
        return f"ended by {signal.Signals(-code).name}"
    return f"ended with exit code {code}" if code else None


def _silent(text: str) -> None:
    """What ranks other than 0 print."""


def train(config: RunConfig, resume=None) -> dict:
    """Launch Fabric from ``config.trainer`` (one CPU process: ``LocalProcess``), give each rank
    its threads (``set_threads``) and run the trainer; returns a summary dict. The process group,
    if any, is gone when it returns (``leave_process_group``); a run that raised keeps it, since a
    failed collective's threads may still wait for a hung rank."""
    summary = _launch_and_fit(config, resume)
    leave_process_group()
    return summary


def _launch_and_fit(config: RunConfig, resume) -> dict:
    if not one_cpu_process(config):
        return _fit(make_fabric(config), config, resume)
    with learner.optimizers_without_dynamo():
        return _fit(LocalProcess(), config, resume)


def _fit(fabric, config: RunConfig, resume) -> dict:
    set_threads(config.trainer.torch_threads, getattr(fabric.strategy, "num_processes", 1))
    trainer = Trainer(fabric, config, resume)
    try:
        return trainer.fit()
    except BaseException as error:
        never_started = run_control.read_status(trainer.root)["status"] == "unknown"
        if isinstance(error, KeyboardInterrupt) or never_started:
            # a second Ctrl-C (no checkpoint now), or a run that could not record its start (a
            # full disk, say): a new run without any checkpoint goes
            trainer.discard_if_empty()
        raise


def leave_process_group() -> None:
    """Destroy torch.distributed's process group, if any, and join its threads while the
    interpreter is whole.

    Left to the exit, gloo's worker threads can free a collective's tensors after Python is gone
    and abort a run that ended well (SIGABRT, "terminate called without an active exception");
    Lightning destroys the group at exit for NCCL only. The group must not be freed by DDP's
    reducer either: that holds the GIL, which a worker freeing a tensor waits for (a deadlock).
    So this keeps the last reference, collects the reducers, then drops it: the group's own
    destructor releases the GIL while it joins the threads."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    group = torch.distributed.group.WORLD
    torch.distributed.destroy_process_group()
    gc.collect()
    del group
