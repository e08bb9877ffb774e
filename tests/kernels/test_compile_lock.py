"""numba's disk cache under file locks (:mod:`gpu_envs.kernels.compile_lock`), in one process.

Saves: numba reads a cache index, adds its signature and writes it back with no lock, so two
processes adding the float32 and float64 signatures of one game's kernels at once could both take
the same data file, one index entry then pointing at the other's code (issue 46). Here two savers
race in one process (``flock`` locks separate opens of a file against each other), with numba's
index read slowed down to open the window. The processes that compile once are in
``test_compile_once.py``."""

import fcntl
import os
import subprocess
import sys
import threading
import time

import numba
import pytest
from numba.core import caching
from numba.cuda.core import caching as cuda_caching

from gpu_envs.kernels import compile_lock


@pytest.fixture
def locked_saves(monkeypatch):
    """:func:`compile_lock.lock_cache_saves`, undone after the test."""
    for cache_file in (caching.IndexDataCacheFile, cuda_caching.IndexDataCacheFile):
        monkeypatch.setattr(cache_file, "save", cache_file.save)
    compile_lock.lock_cache_saves()
    compile_lock.lock_cache_saves()  # (a second call wraps nothing twice)


@pytest.mark.parametrize("module", [caching, cuda_caching], ids=["cpu", "cuda"])
def test_two_processes_saving_signatures_at_once_keep_both(
    tmp_path, monkeypatch, module, locked_saves
):
    cache_file = module.IndexDataCacheFile(str(tmp_path), "kernel-12", "stamp")
    load_index = module.IndexDataCacheFile._load_index

    def slow_load_index(self):
        overloads = load_index(self)
        time.sleep(0.2)  # (the other saver reads the same index meanwhile, unless locked out)
        return overloads

    monkeypatch.setattr(module.IndexDataCacheFile, "_load_index", slow_load_index)
    savers = [
        threading.Thread(target=cache_file.save, args=(f"float{bits}", f"code of float{bits}"))
        for bits in (32, 64)
    ]
    for saver in savers:
        saver.start()
    for saver in savers:
        saver.join()
    monkeypatch.setattr(module.IndexDataCacheFile, "_load_index", load_index)
    assert cache_file.load("float32") == "code of float32"
    assert cache_file.load("float64") == "code of float64"


JITTED = "import numba\n@numba.njit(cache=True)\ndef add_one(x):\n    return x + 1\n"


@pytest.fixture
def jitted(tmp_path, monkeypatch):
    """A cached njit function of a fresh module (a cold cache entry of its own), with numba's own
    save (not the locked one an earlier test's env may have installed), restored after the test."""
    save = caching.IndexDataCacheFile.save
    monkeypatch.setattr(caching.IndexDataCacheFile, "save", getattr(save, "__wrapped__", save))
    (tmp_path / "jitted_module.py").write_text(JITTED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import jitted_module

    yield jitted_module.add_one
    sys.modules.pop("jitted_module", None)


def test_a_waiting_compile_loads_what_the_lock_holder_saved(jitted, tmp_path):
    """The first compile of a signature waits while its lock is held (by a process compiling
    it), then loads what that process saved instead of compiling it again."""
    add_one = compile_lock.compile_once(jitted)
    assert compile_lock.compile_once(add_one) is add_one  # (wrapped once)
    assert add_one.compile.compiles_once
    holder = os.open(compile_lock.lock_path(add_one, (numba.int64,)), os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # (a separate open: it locks this process out too)
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (add_one(1), done.set()))
    waiter.start()
    time.sleep(0.5)
    assert not done.is_set(), "compiled while another held the signature's lock"
    # the holder compiles and saves (another process: the waiter holds numba's compiler lock)
    code = "import jitted_module; jitted_module.add_one(1)"
    environment = {**os.environ, "PYTHONPATH": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=environment, timeout=120)
    fcntl.flock(holder, fcntl.LOCK_UN)
    os.close(holder)
    waiter.join(60)
    assert done.is_set()
    assert add_one.stats.cache_hits[(numba.int64,)] == 1
    assert not add_one.stats.cache_misses[(numba.int64,)]


def test_what_has_no_disk_cache_or_no_flock_is_left_as_it_is(jitted, monkeypatch):
    uncached = numba.njit(jitted.py_func)
    assert compile_lock.compile_once(uncached).compile == uncached.compile  # (bound anew)
    assert "compile" not in vars(uncached)
    plain = object()  # (the CUDA simulator's kernels have no numba cache at all)
    assert compile_lock.compile_once(plain) is plain
    monkeypatch.setattr(compile_lock, "fcntl", None)  # (Windows)
    assert "compile" not in vars(compile_lock.compile_once(jitted))
    assert jitted(1) == 2


def test_an_unusable_lock_file_compiles_unlocked(jitted, monkeypatch):
    """A cache folder where no lock file can be made (read-only): numba compiles as before."""
    add_one = compile_lock.compile_once(jitted)
    monkeypatch.setattr(compile_lock, "lock_path", lambda *_: os.path.join("/proc", "no", "lock"))
    assert add_one(41) == 42
    assert add_one.stats.cache_misses[(numba.int64,)] == 1
