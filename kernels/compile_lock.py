"""One process compiles a kernel, the others wait and load it: numba's disk cache under file locks.

numba looks a cached function's signature up in its disk cache, compiles it on a miss and saves
it, with no lock between processes: N processes starting one game on a cold cache (AsyncVectorEnv
or Ray workers, DDP ranks) all miss, all compile, and share the cores doing it (Tag: 8 processes
took 4.8x one process's start). :func:`compile_once` gives a dispatcher (``njit`` or ``cuda.jit``
with ``cache=True``) a compile that, the first time a signature is needed in the process and the
cache lacks it, holds an exclusive ``flock`` on ``<index>.<signature digest>.lock`` beside the
function's cache index: the first process compiles and saves; the others wait on the lock, then
find the entry written and load it (after letting go of the lock, so they load at once). A cached
signature loads with no lock; a process killed while compiling releases the lock with its death
(the next waiter compiles). The lock is held only around that compile-or-load, never after it.

numba also reads the index, adds a signature and writes it back with no lock, so two processes
saving two signatures of one function (float32 and float64) at once can both take the same data
file name, one index entry then pointing at the other's code. Each save therefore holds an
exclusive ``flock`` on ``<index>.lock`` (:func:`lock_cache_saves`).

No lock where there is nothing to share or no way to lock: no disk cache (``cache=False``, the
CUDA simulator), a lock file that cannot be created (a read-only cache directory), no ``fcntl``
(Windows); numba then behaves as it always did.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from typing import Any, TypeVar

try:
    import fcntl
except ImportError:  # (Windows)
    fcntl = None  # type: ignore[assignment]

Dispatcher = TypeVar("Dispatcher")


def index_path(dispatcher: Any) -> str | None:
    """The path of ``dispatcher``'s numba cache index (``*.nbi``, which may not exist yet), or
    None when it has no disk cache."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    return getattr(cache_file, "_index_path", None)


def lock_path(dispatcher: Any, sig: Any) -> str | None:
    """The lock file that processes compiling ``sig`` of ``dispatcher`` share, beside its cache
    index (None: no disk cache)."""
    path = index_path(dispatcher)
    if path is None:
        return None
    return f"{path}.{hashlib.sha1(str(sig).encode()).hexdigest()[:12]}.lock"


def compile_once(dispatcher: Dispatcher) -> Dispatcher:
    """``dispatcher`` itself, its ``compile`` (which its calls and callers use) now compiling each
    signature once among the processes that share its disk cache, as the module says; a
    dispatcher without a disk cache is returned as it is."""
    if fcntl is None or index_path(dispatcher) is None:
        return dispatcher
    compile_: Callable = dispatcher.compile  # type: ignore[attr-defined]
    if getattr(compile_, "compiles_once", False):
        return dispatcher
    _lock_saves(type(dispatcher._cache._cache_file))  # type: ignore[attr-defined]

    @functools.wraps(compile_)
    def compile_or_load(sig):
        from numba.core.compiler_lock import global_compiler_lock

        # The process's compiler lock first (numba's compile takes it next): no thread of this
        # process then waits for a file lock held by another thread that waits for this one.
        with global_compiler_lock:
            if _in_memory(dispatcher, sig) or _cached(dispatcher, sig):
                return compile_(sig)
            lock = _open_lock(lock_path(dispatcher, sig))
            if lock is None:
                return compile_(sig)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)  # waits while another process compiles it
                if _cached(dispatcher, sig):  # it did: load with the others, unlocked
                    fcntl.flock(lock, fcntl.LOCK_UN)
                return compile_(sig)
            finally:
                # Unlocked explicitly: a child forked meanwhile shares the descriptor, and a mere
                # close would leave the lock held until that child exits.
                fcntl.flock(lock, fcntl.LOCK_UN)
                os.close(lock)

    compile_or_load.compiles_once = True  # type: ignore[attr-defined]
    dispatcher.compile = compile_or_load  # type: ignore[attr-defined]
    return dispatcher


def _in_memory(dispatcher: Any, sig: Any) -> bool:
    from numba.core import sigutils

    try:
        args, _ = sigutils.normalize_signature(sig)
        return tuple(args) in dispatcher.overloads
    except Exception:  # (numba's compile reports a bad signature)
        return True


def _cached(dispatcher: Any, sig: Any) -> bool:
    """Whether ``dispatcher``'s cache index holds ``sig`` (for this machine and source) and the
    data file it names exists (numba writes the index first, the data file whole afterwards)."""
    cache = dispatcher._cache
    try:
        key = cache._index_key(sig, dispatcher.targetctx.codegen())
        name = cache._cache_file._load_index().get(key)
        return name is not None and os.path.exists(cache._cache_file._data_path(name))
    except Exception:  # (numba's own lookup decides)
        return False


def _open_lock(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError:
        return None


def lock_cache_saves() -> None:
    """Make every numba disk-cache save in this process, CPU and CUDA, hold the index's lock
    (:func:`compile_once` does it for the classes of the dispatchers it is given)."""
    from numba.core import caching
    from numba.cuda.core import caching as cuda_caching

    _lock_saves(caching.IndexDataCacheFile)
    _lock_saves(cuda_caching.IndexDataCacheFile)


def _lock_saves(cache_file: type) -> None:
    """From now on ``cache_file.save`` (numba's ``IndexDataCacheFile`` or numba-cuda's) holds an
    exclusive ``flock`` on ``<index>.lock`` while it reads the index, picks a data file name and
    writes both."""
    save: Callable = cache_file.save  # type: ignore[attr-defined]
    if fcntl is None or getattr(save, "saves_locked", False):
        return

    @functools.wraps(save)
    def locked_save(self, key, data):
        lock = _open_lock(f"{self._index_path}.lock")
        if lock is None:  # (numba's save then fails as it would)
            return save(self, key, data)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return save(self, key, data)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(lock)

    locked_save.saves_locked = True  # type: ignore[attr-defined]
    cache_file.save = locked_save  # type: ignore[attr-defined]
