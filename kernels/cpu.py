"""The CPU driver of every game: njit loops over blocks of envs, serial or parallel by batch size.

A game's logic gives two :func:`~gpu_envs.kernels.targets.kernel_function`\\ s,
``step_envs(start, stop, envs)`` and ``reset_envs(start, stop, mask, envs)``, that advance or
reset the envs ``start..stop-1`` (``envs``: the arguments as the logic's ``KernelArgs``
namedtuple); :func:`make_driver` compiles loops over blocks of
``block_size`` envs around them (cached on disk, loaded by every later process; processes starting
at once on a cold cache compile them once, :mod:`~gpu_envs.kernels.compile_lock`). The driver only
loops: the order of phases, the autoreset and the outputs are the game's logic, shared with the
CUDA driver.
"""

from __future__ import annotations

import builtins
import ctypes
import functools
import glob
import hashlib
import inspect
import os
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba.core import types as numba_types
from numba.core.errors import NumbaIRAssumptionWarning
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from gpu_envs.kernels import action_check, threads
from gpu_envs.kernels.compile_lock import compile_once

# numba's pedantic IR check misreads the counters of the logic inlined into these loops
# ("variable ... is not in scope", six on a cold Tag compile); only the loops here are silenced.
warnings.filterwarnings("ignore", category=NumbaIRAssumptionWarning, module=r".*kernels[/\\]cpu$")

#: Options of every compiled loop. ``_nrt=False``: the loops allocate nothing, and without the
#: runtime numba emits no reference counting for the views handed to the inlined logic.
#: ``error_model="numpy"``: no ZeroDivisionError branch on divisions (it blocks vectorisation).
_JIT = {"cache": True, "error_model": "numpy", "_nrt": False}


def source_digest(*logic_functions: Callable) -> str:
    """A digest of what a driver compiles: the logic functions (by qualified name), their modules'
    source and the kernels package's.

    numba checks only the timestamp of the file that defines a cached function (this one), so the
    drivers' names carry this digest: editing a game's logic then compiles afresh, and two logics
    of one file never share a cache entry.
    """
    digest = hashlib.sha1()
    files = set(glob.glob(os.path.join(os.path.dirname(__file__), "*.py")))
    for function in logic_functions:
        digest.update(f"{function.__module__}.{function.__qualname__};".encode())
        files.add(inspect.getsourcefile(function))
    for path in sorted(files):
        with open(path, "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:12]


# The loops' templates. Each game's loops are copies of them whose globals hold its logic
# (``step_envs``, ``reset_envs``, ``KernelArgs``) and ``block_size``, see :func:`_game_loop`.
def _step_loop(num_envs, before, like, after, source, upper, check):
    # The actions: the caller's memory (``source`` an address or an array), checked before any env
    # moves; True (nothing stepped) when an entry lies outside [0, upper[head]].
    actions = _actions_from(like, source)
    rows = (actions.size // upper.size, upper.size)  # (a view of the C-ordered actions)
    if check and any_out_of_range(actions.reshape(rows), upper):  # noqa: F821
        return True
    args = before + (actions,) + after
    for block in numba.prange((num_envs + block_size - 1) // block_size):  # noqa: F821
        start = block * block_size  # noqa: F821
        # (built inside the parallel body: numba's parfors cannot take a namedtuple in)
        step_envs(start, min(start + block_size, num_envs), KernelArgs(*args))  # noqa: F821
    return False


def _reset_loop(num_envs, mask, args):
    reset_envs(0, num_envs, mask, KernelArgs(*args))  # noqa: F821


@intrinsic
def _actions_from(typingctx, like, source):
    """The actions a checked step reads: ``source`` itself when it is an array, else an array of
    ``like``'s type and shape whose data lie at the address ``source`` (a C-contiguous buffer of
    that dtype and shape that the caller checked and keeps alive: a torch tensor's ``data_ptr()``,
    so that no NumPy view of the tensor is made per step)."""
    if not (isinstance(like, numba_types.Array) and like.layout == "C"):
        return None
    if isinstance(source, numba_types.Array):

        def identity(context, builder, signature, args):
            return args[1]

        return source(like, source), identity
    if not isinstance(source, numba_types.Integer):
        return None
    result = like.copy(readonly=False)

    def at_address(context, builder, signature, args):
        shaped = make_array(like)(context, builder, args[0])
        out = make_array(result)(context, builder)
        populate_array(
            out,
            data=builder.inttoptr(args[1], shaped.data.type),
            shape=shaped.shape,
            strides=shaped.strides,
            itemsize=shaped.itemsize,
            meminfo=None,  # not owned: the caller keeps the memory alive for the call
        )
        return out._getvalue()

    return result(like, source), at_address


#: The ``upper`` of an unchecked step.
_NO_BOUNDS = np.zeros(1, np.int64)


def _game_loop(template: Callable, name: str, parallel: bool = False, **names) -> Callable:
    """``template`` compiled as the loop ``name`` whose globals ``names`` are one game's.

    Globals, not a closure: numba keys its disk cache by a hash of the pickled closure cells, and
    a dispatcher pickles with a new uuid in every process, so a closure over the logic would miss
    the cache (and compile again) in every new process. The name, which keys the cache file,
    must therefore say everything ``names`` hold (the logic's source digest, the block size).
    """
    loop = types.FunctionType(
        template.__code__,
        {"__builtins__": builtins, "__name__": __name__, "numba": numba, **names},
        name,
    )
    loop.__qualname__ = name  # numba's disk cache files are named by the qualified name
    return compile_once(numba.njit(parallel=parallel, **_JIT)(loop))


@dataclass(frozen=True)
class CPUDriver:
    """Compiled loops of one game.

    A step loop is called ``(num_envs, before, like, after, source, upper, check)``: it steps envs
    ``0..num_envs-1`` on the logic's arguments ``(*before, actions, *after)`` and returns False,
    or returns True (no env stepped) when ``check`` and an action lies outside
    ``[0, upper[head]]`` (``actions`` as rows of ``upper.size`` entries). ``actions`` is
    ``source`` when that is an array, else the memory at the address ``source`` (an int) read as
    an array of ``like``'s dtype and shape: the caller must have checked that memory's dtype,
    shape and C order, and keep it alive for the call (a torch tensor's ``data_ptr()``: no NumPy
    view of it is made per step). The reset loop takes the logic's arguments as one tuple.
    """

    step_serial: Callable
    step_parallel: Callable
    reset_loop: Callable
    parallel_min_envs: int

    def step(self, num_envs: int, args: tuple, actions_index: int) -> None:
        """Advance envs ``0..num_envs-1`` by one step on the logic's arguments ``args`` (the
        actions at ``actions_index``), unchecked."""
        index = actions_index
        before, actions, after = args[:index], args[index], args[index + 1 :]
        self._step_loop(num_envs)(num_envs, before, actions, after, actions, _NO_BOUNDS, False)

    def compiled_step(self, num_envs: int, *arguments) -> Callable[..., bool]:
        """The step loop for ``num_envs`` envs, compiled (or loaded from the cache) for the types
        of ``(num_envs, before, like, after, source, upper, check)``: a call with such arguments
        skips numba's typing of every argument, so every call must pass values of exactly these
        types (array dtypes, dimensions and C layout, the address an int; in another type the
        kernel would misread memory)."""
        loop = self._step_loop(num_envs)
        return loop.compile((numba.typeof(num_envs), *map(numba.typeof, arguments)))

    def prepared_step(self, num_envs: int, *arguments) -> Callable[..., bool]:
        """What an env calls each step (arguments as :meth:`compiled_step`'s): the serial loop
        for small batches (or when the process runs one numba thread,
        :func:`~gpu_envs.kernels.threads.process_threads`), else an :class:`AdaptiveStep` over
        the compiled parallel and serial loops, whose parallel loop runs that many threads."""
        signature = (numba.typeof(num_envs), *map(numba.typeof, arguments))
        serial = self.step_serial.compile(signature)
        # (a small batch does not read the thread count)
        if num_envs < self.parallel_min_envs or (count := threads.process_threads()) < 2:
            return serial
        parallel = self.step_parallel.compile(signature)
        choice = _LOOP_CHOICES.setdefault((parallel, num_envs), LoopChoice())
        return AdaptiveStep(parallel, serial, choice=choice, threads=count)

    def _step_loop(self, num_envs: int) -> Callable:
        """The parallel loop from ``parallel_min_envs`` envs on when the process runs 2+ threads
        (:func:`~gpu_envs.kernels.threads.process_threads`)."""
        if num_envs < self.parallel_min_envs or threads.process_threads() < 2:
            return self.step_serial
        return self.step_parallel

    def reset(self, num_envs: int, mask, args: tuple) -> None:
        """Reset the envs where ``mask`` is True."""
        self.reset_loop(num_envs, mask, args)


@dataclass
class LoopChoice:
    """The outcome of the last comparison of the parallel and serial loops of one compiled step at
    one env count, shared by every env of that size in the process (:class:`AdaptiveStep`)."""

    #: Whether the parallel loop runs between comparisons.
    parallel: bool = True
    #: Calls between comparisons at the chosen loop's speed (0: no comparison made yet).
    calls: int = 0


#: (compiled parallel step, env count) -> the choice its envs share in this process.
_LOOP_CHOICES: dict[tuple[Callable, int], LoopChoice] = {}


class AdaptiveStep:
    """The parallel step loop, or the serial one while the parallel loop is not faster.

    On a shared CPU a parallel region waits for every worker thread, and a worker that the
    operating system has descheduled stalls the whole step (a 2-thread loop measured 17x slower
    than the serial one beside two busy processes on two cores). So the two loops are compared
    on the env's own steps: every ``probe_interval_ns`` of stepping (counted in calls at the
    current loop's speed), two calls run on the current loop and two on the other one, timed; the
    other loop takes over when its faster call beats the current loop's faster call by
    ``margin``. A probe costs at most two calls of the slower loop per interval.

    The outcome goes to ``choice``, which the driver shares between the envs of one size (and
    argument types) in the process: a new env starts on the loop chosen last, its first comparison
    one interval later (not after :attr:`FIRST_PROBE_AFTER` calls), so short-lived envs do not
    re-time the loops each.

    Args:
        parallel, serial: the compiled loops (same arguments, same results).
        clock: nanoseconds (``time.perf_counter_ns``; tests pass a fake one).
        probe_interval_ns: stepping time between two comparisons.
        margin: how much faster (0.9: 10 % faster) the other loop must be to take over.
        choice: the shared outcome to start from and update (default: this instance's own).
        threads: the numba threads of the parallel loop, set in each thread that calls the step
            (:func:`~gpu_envs.kernels.threads.use_in_this_thread`); None leaves numba's setting.
    """

    __slots__ = (
        "_loops",
        "_current",
        "_countdown",
        "_probe",
        "_times",
        "_clock",
        "_interval",
        "_margin",
        "_threads",
        "_launcher",
        "choice",
    )

    #: Calls before the first comparison (thread-pool start-up is not compared).
    FIRST_PROBE_AFTER = 8
    #: Calls between comparisons, at least and at most.
    MIN_CALLS, MAX_CALLS = 16, 1 << 20

    def __init__(
        self,
        parallel: Callable[..., bool],
        serial: Callable[..., bool],
        clock: Callable[[], int] = time.perf_counter_ns,
        probe_interval_ns: int = 500_000_000,
        margin: float = 0.9,
        choice: LoopChoice | None = None,
        threads: int | None = None,
    ):
        self.choice = choice = LoopChoice() if choice is None else choice
        self._loops = (serial, parallel)
        self._current = self._loops[choice.parallel]
        self._countdown = choice.calls or self.FIRST_PROBE_AFTER
        self._probe = -1  # calls into a comparison, -1 outside one
        self._times = [0, 0, 0, 0]
        self._clock, self._interval, self._margin = clock, probe_interval_ns, margin
        self._threads, self._launcher = threads, -1  # the last thread that called, by ident

    def __call__(self, *arguments) -> bool:
        if self._launcher != threading.get_ident():
            self._adopt_thread()
        self._countdown -= 1
        if self._countdown > 0:
            return self._current(*arguments)
        return self._compare(arguments)

    def _adopt_thread(self) -> None:
        """Set the parallel loop's threads in the thread now calling (numba's setting is per
        thread)."""
        self._launcher = threading.get_ident()
        if self._threads is not None:
            threads.use_in_this_thread(self._threads)

    def _compare(self, arguments: tuple) -> bool:
        """One call of a comparison: calls 0 and 1 on the current loop, 2 and 3 on the other."""
        self._probe += 1
        probe = self._probe
        current, other = self._current, self._loops[self._current is self._loops[0]]
        loop = current if probe < 2 else other
        start = self._clock()
        result = loop(*arguments)
        self._times[probe] = self._clock() - start
        if probe < 3:
            self._countdown = 1
            return result
        times, self._probe = self._times, -1
        kept = min(times[0], times[1])
        challenger = min(times[2], times[3])
        if challenger < self._margin * kept:
            self._current, kept = other, challenger
        calls = int(min(max(self._interval // max(kept, 1), self.MIN_CALLS), self.MAX_CALLS))
        self._countdown = calls
        self.choice.parallel, self.choice.calls = self._current is self._loops[1], calls
        return result

    def pin(self, parallel: bool) -> None:
        """Run only the parallel (True) or the serial loop from now on, never comparing them
        (benchmarks time each loop on its own); the shared choice is left as it is."""
        self._current, self._countdown, self._probe = self._loops[parallel], 1 << 62, -1

    @property
    def parallel_runs(self) -> bool:
        """Whether the parallel loop runs the steps between comparisons."""
        return self._current is self._loops[1]


@functools.cache
def use_fork_safe_threads() -> None:
    """Make numba's parallel loops run on TBB when the ``tbb`` wheel is installed (a dependency).

    numba's default GNU OpenMP layer kills a child process that forks after a parallel region has
    run (``multiprocessing`` with fork, SB3's ``SubprocVecEnv``); TBB is fork-safe. pip puts
    ``libtbb.so.12`` in ``<prefix>/lib``, where numba does not look: load it first.
    """
    for library in sorted(glob.glob(os.path.join(sys.prefix, "lib", "libtbb.so.12*"))):
        try:
            ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            continue


@functools.cache
def make_driver(
    game: str, step_envs, reset_envs, kernel_args: type, block_size: int, parallel_min_envs: int
) -> CPUDriver:
    """The CPU driver of ``game``: a parallel loop from ``parallel_min_envs`` envs on, else serial.

    The loops take the arguments as a flat tuple and hand the logic ``kernel_args(*args)`` (the
    logic's ``KernelArgs`` namedtuple class).
    ``block_size`` envs form one call of ``step_envs`` (a block's arrays stay in cache across the
    logic's passes); below ``parallel_min_envs`` one thread is faster than a parallel region.
    Made once per process and game: every env of the game shares its compiled loops.
    """
    # The loops call the logic compiled on its own (cached), not inlined into each loop. Every
    # compiled function compiles once among processes starting at once (``compile_lock``).
    use_fork_safe_threads()
    name = f"{game}_{source_digest(step_envs, reset_envs)}"
    step_envs = compile_once(numba.njit(**_JIT)(step_envs))
    reset_envs = compile_once(numba.njit(**_JIT)(reset_envs))
    step = functools.partial(
        _game_loop,
        _step_loop,
        step_envs=step_envs,
        KernelArgs=kernel_args,
        block_size=block_size,
        _actions_from=_actions_from,
        any_out_of_range=compile_once(action_check.any_out_of_range),
    )
    return CPUDriver(
        step_serial=step(f"{name}_block{block_size}_step_serial"),
        step_parallel=step(f"{name}_block{block_size}_step_parallel", parallel=True),
        reset_loop=_game_loop(
            _reset_loop, f"{name}_reset", reset_envs=reset_envs, KernelArgs=kernel_args
        ),
        parallel_min_envs=parallel_min_envs,
    )
