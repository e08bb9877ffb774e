"""The kernel compile before the parity checks runs its processes at once, and each saves into
numba's disk cache under a lock per cache index: numba reads the index, adds its signature and
writes it back with no lock, so two processes adding the float32 and float64 signatures of one
game's kernels at once could both take the same data file, one index entry then pointing at the
other's code (issue 46). Here two savers race in one process (``flock`` locks separate opens of
a file against each other), with numba's index read slowed down to open the window."""

import threading
import time

import pytest
from numba.core import caching
from numba.cuda.core import caching as cuda_caching

from gpu_envs.device_check import compile as compile_part


@pytest.fixture
def locked_saves(monkeypatch):
    """:func:`compile_part.lock_cache_saves`, undone after the test."""
    for cache_file in (caching.IndexDataCacheFile, cuda_caching.IndexDataCacheFile):
        monkeypatch.setattr(cache_file, "save", cache_file.save)
    monkeypatch.setattr(compile_part, "_LOCKED", set())
    compile_part.lock_cache_saves()
    compile_part.lock_cache_saves()  # (a second call wraps nothing twice)


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
