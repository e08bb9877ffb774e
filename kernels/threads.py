"""How many numba threads a process's parallel step loops run: the CPUs it may use, shared with the
processes beside it.

numba's pool has one thread per CPU of the machine (``NUMBA_NUM_THREADS``, fixed when numba
starts). Launchers start several processes on one machine (torchrun's and Lightning's ranks, Ray's
env runners, SB3's ``SubprocVecEnv``, gymnasium's ``AsyncVectorEnv``), and a parallel region waits
for every one of its threads: with a pool per process over the same CPUs, each step waits on
threads the operating system has descheduled. :func:`process_threads` is the count the CPU driver
(:mod:`gpu_envs.kernels.cpu`) gives its parallel loops:

1. ``GPU_ENVS_NUM_THREADS`` where set (a positive integer): the user's word, for the launchers
   that say nothing about their processes (``SubprocVecEnv``, ``AsyncVectorEnv``, a shell loop);
2. else the CPUs this process may run on (its affinity, ``os.sched_getaffinity``), bounded by its
   cgroup's CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), divided by the processes that
   share them where the launcher says how many (``LOCAL_WORLD_SIZE``, else ``WORLD_SIZE``:
   torchrun, Lightning), and bounded by ``OMP_NUM_THREADS`` where set (Ray sets it to an actor's
   CPUs, 1 by default; torchrun to 1 per rank unless given);

never more than numba's pool, at least 1. With one thread the driver runs its serial loops only
and numba's pool never starts. ``numba.set_num_threads`` holds for the thread that calls it, so the
driver sets the count in each thread that launches a parallel loop (:func:`use_in_this_thread`),
never above what that thread was set to before (a trainer's or the user's own setting).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numba

#: The environment variable that sets the count (see the module).
OVERRIDE = "GPU_ENVS_NUM_THREADS"
#: Where the cgroup file systems are mounted.
CGROUP_ROOT = "/sys/fs/cgroup"


def process_threads(environ: Mapping[str, str] | None = None) -> int:
    """The numba threads this process's parallel loops run (see the module); ``environ`` defaults
    to ``os.environ``.

    Raises:
        ValueError: ``GPU_ENVS_NUM_THREADS`` is set but not a positive integer.
    """
    environ = os.environ if environ is None else environ
    pool = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    given = environ.get(OVERRIDE, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ValueError(
                f"{OVERRIDE} must be a positive integer (the numba threads of each process's "
                f"parallel env steps), got {given!r}; unset it to follow the CPUs"
            )
        return min(int(given), pool)
    cpus = usable_cpus()
    sharing = _positive(environ.get("LOCAL_WORLD_SIZE")) or _positive(environ.get("WORLD_SIZE"))
    share = cpus // (sharing or 1)
    launcher_cap = _positive(environ.get("OMP_NUM_THREADS"))
    if launcher_cap:
        share = min(share, launcher_cap)
    return max(1, min(share, pool))


def usable_cpus(cgroup_root: str = CGROUP_ROOT, own_cgroups: str | None = None) -> int:
    """The CPUs this process may run on: its affinity, bounded by its cgroup's CPU quota (whole
    CPUs, at least 1). ``own_cgroups``: the text of ``/proc/self/cgroup`` (read when None)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root, own_cgroups)
    if quota is not None:
        cpus = min(cpus, max(1, int(quota)))
    return max(1, cpus)


def cgroup_cpu_quota(
    cgroup_root: str = CGROUP_ROOT, own_cgroups: str | None = None
) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (quota / period, the smallest along its path
    up to the root), or None: no quota, or no cgroup file system to read."""
    if own_cgroups is None:
        try:
            with open("/proc/self/cgroup") as handle:
                own_cgroups = handle.read()
        except OSError:
            return None
    quotas = []
    for line in own_cgroups.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # cgroup v2: "0::/path", the quota in cpu.max ("max" or "q p")
            quotas += _along(os.path.join(cgroup_root, path.lstrip("/")), cgroup_root, _v2_quota)
        elif "cpu" in controllers.split(","):  # cgroup v1: cpu.cfs_quota_us (-1: none)
            for mount in dict.fromkeys(("cpu", "cpu,cpuacct", controllers)):
                folder = os.path.join(cgroup_root, mount)
                quotas += _along(os.path.join(folder, path.lstrip("/")), folder, _v1_quota)
    return min(quotas) if quotas else None


def use_in_this_thread(threads: int) -> None:
    """Make the parallel loops that the calling thread launches run ``threads`` threads, or fewer
    where this thread was set to fewer (``numba.set_num_threads`` holds per thread)."""
    current = numba.get_num_threads()
    if threads < current:
        numba.set_num_threads(threads)


def _along(folder: str, root: str, read) -> list[float]:
    """The quotas ``read(folder)`` gives for ``folder`` and each parent up to ``root``."""
    quotas = []
    root = os.path.normpath(root)
    folder = os.path.normpath(folder)
    while folder.startswith(root):
        quota = read(folder)
        if quota is not None:
            quotas.append(quota)
        if folder == root:
            break
        folder = os.path.dirname(folder)
    return quotas


def _v2_quota(folder: str) -> float | None:
    fields = _read(os.path.join(folder, "cpu.max")).split()
    if len(fields) == 2 and fields[0] != "max" and _positive(fields[0]) and _positive(fields[1]):
        return int(fields[0]) / int(fields[1])
    return None


def _v1_quota(folder: str) -> float | None:
    quota = _positive(_read(os.path.join(folder, "cpu.cfs_quota_us")))
    period = _positive(_read(os.path.join(folder, "cpu.cfs_period_us")))
    return quota / period if quota and period else None


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _positive(text: str | None) -> int | None:
    """``text`` as a positive integer, or None (unset, empty or anything else)."""
    text = (text or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None
