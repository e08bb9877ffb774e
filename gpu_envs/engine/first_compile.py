"""The lines said while something compiles for seconds before a run can start.

numba compiles a game's CPU loops (or CUDA kernels) at its first reset and step, for seconds, and
caches them on disk; later processes load them at once, and processes starting at once on a cold
cache wait for the first one's compile and load it (:mod:`gpu_envs.kernels.compile_lock`).
:func:`announce` logs, at INFO on the logger ``gpu_envs.compile``, "compiling the CPU kernels of
cartpole (first run only ...)" once per process and game, when that cache holds none of them
yet. :func:`timed` logs the same way before and after a compilation that every process repeats
(``torch.compile`` of the trainer's gradient step), the first time in the process. Python's
logging shows no INFO record unless asked, so library users see nothing; the ``gpu-envs``
commands show them (:func:`show_on_stderr`).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpu_envs.kernels.compile_lock import index_path

LOGGER = logging.getLogger("gpu_envs.compile")

_checked: set[tuple[str, str]] = set()


def cache_is_cold(dispatcher: Any) -> bool:
    """Whether numba's disk cache holds no compiled code of ``dispatcher`` (an ``njit`` or
    ``cuda.jit`` function with ``cache=True``) yet; False when it has no disk cache (the CUDA
    simulator compiles nothing)."""
    path = index_path(dispatcher)
    return path is not None and not os.path.exists(path)


def announce(game: str, target: str, driver: Any) -> None:
    """Log that ``game``'s ``target`` ("cpu" or "cuda") kernels compile now, once per process and
    game, when the kernel its envs call first (the reset of its ``driver``) is not cached."""
    key = (game, target)
    if key in _checked:
        return
    _checked.add(key)
    if cache_is_cold(driver.reset_loop if target == "cpu" else driver.reset_kernel):
        LOGGER.info(
            "compiling the %s kernels of %s (first run only: numba caches them on disk) ...",
            target.upper(),
            game,
        )


@contextmanager
def timed(what: str) -> Iterator[None]:
    """Log "compiling ``what`` ..." before the block and "compiled in 12.3 s" after it, the first
    time in the process that ``what`` compiles; later blocks of it (and a block that raises) say
    nothing more."""
    if ("timed", what) in _checked:
        yield
        return
    _checked.add(("timed", what))
    LOGGER.info("compiling %s ...", what)
    start = time.perf_counter()
    yield
    LOGGER.info("compiled in %.1f s", time.perf_counter() - start)


class _Stderr(logging.Handler):
    """Each record as one line on the ``sys.stderr`` of the moment it is logged."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr, flush=True)


def show_on_stderr() -> None:
    """Print the INFO lines of :data:`LOGGER` on stderr (what the ``gpu-envs`` commands do), once
    however often it is called."""
    if not any(isinstance(handler, _Stderr) for handler in LOGGER.handlers):
        LOGGER.addHandler(_Stderr())
        LOGGER.setLevel(logging.INFO)
        LOGGER.propagate = False  # shown here: not again by a root handler
