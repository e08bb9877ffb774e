"""Device and dtype resolution shared by every env, and the bridge from torch tensors to kernels."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def simulated_cuda() -> bool:
    """True under ``NUMBA_ENABLE_CUDASIM=1`` on a host where torch has no CUDA: ``device="cuda"``
    then runs the CUDA kernels in numba's simulator, on CPU tensors (see :func:`kernel_target`)."""
    from numba import config

    return bool(getattr(config, "ENABLE_CUDASIM", 0)) and not torch.cuda.is_available()


def kernel_target(device: str | torch.device) -> str:
    """Which kernels serve a requested device: "cuda" (a GPU, or the simulator) or "cpu"."""
    if isinstance(device, str) and device == "auto":
        return "cuda" if cuda_available() or simulated_cuda() else "cpu"
    return "cuda" if torch.device(device).type == "cuda" else "cpu"


def resolve_device(device: str | torch.device) -> torch.device:
    """Turn "cpu", "cuda", "cuda:N" or "auto" into the torch device the tensors live on, with a
    clear error if unusable. With a simulated CUDA device (:func:`simulated_cuda`) that is the
    CPU."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda") if cuda_available() else torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"unknown device {device!r}: use 'cpu', 'cuda', 'cuda:N' or 'auto'"
        ) from error
    if resolved.type == "cpu":
        return resolved
    if resolved.type != "cuda":
        raise ValueError(f"unsupported device {device!r}: gpu-envs runs on 'cpu' or 'cuda' devices")
    if simulated_cuda():
        return torch.device("cpu")
    if not cuda_available():
        raise RuntimeError(
            f"device {device!r} requested but no CUDA GPU is usable here "
            "(torch.cuda.is_available() is False or numba-cuda finds no driver); use device='cpu' "
            "or 'auto'"
        )
    if resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise ValueError(
            f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) present"
        )
    return torch.device(
        "cuda", torch.cuda.current_device() if resolved.index is None else resolved.index
    )


def cuda_available() -> bool:
    """True when both torch and numba-cuda can use a GPU."""
    if not torch.cuda.is_available():
        return False
    from numba import cuda

    return cuda.is_available()


def resolve_dtype(dtype, device: torch.device) -> torch.dtype:
    """State dtype: float64 by default on the CPU (bit-exact with gymnasium), float32 on CUDA."""
    if dtype is None:
        return torch.float64 if device.type == "cpu" else torch.float32
    if isinstance(dtype, torch.dtype) and dtype in _DTYPES.values():
        return dtype
    name = np.dtype(dtype).name if not isinstance(dtype, (str, torch.dtype)) else str(dtype)
    name = name.replace("torch.", "")
    if name not in _DTYPES:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return _DTYPES[name]


def kernel_view(tensor: torch.Tensor):
    """A zero-copy array view of ``tensor`` for the kernels: NumPy on the CPU, numba-cuda on GPU.

    int64 tensors that hold RNG words are viewed as uint64 by the caller (``.view(np.uint64)``).
    """
    if tensor.device.type == "cpu":
        return tensor.numpy()
    from numba import cuda

    return cuda.as_cuda_array(tensor.detach())


def launch_stream(device: torch.device):
    """The numba stream matching torch's current stream on ``device`` (the simulator's default
    stream for a simulated device), made once per torch stream and device (every device's default
    stream has the handle 0). Call it inside :func:`numba_context` of ``device``."""
    from numba import cuda

    if device.type == "cpu":
        return cuda.default_stream()
    key = (device.index, torch.cuda.current_stream(device).cuda_stream)
    stream = _EXTERNAL_STREAMS.get(key)
    if stream is None:
        stream = _EXTERNAL_STREAMS[key] = cuda.external_stream(key[1])
    return stream


_EXTERNAL_STREAMS: dict[tuple[int | None, int], object] = {}


def numba_context(device: torch.device):
    """A context manager making ``device``'s GPU numba's current one (``cuda:N`` selects GPU N for
    launches and copies; torch's own ``torch.cuda.device`` does not switch numba's context).
    Does nothing for the CPU and the simulated device."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from numba import cuda

    return cuda.gpus[device.index if device.index is not None else torch.cuda.current_device()]


def torch_to_numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch floating dtype."""
    return np.dtype(str(dtype).replace("torch.", ""))


def fresh_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of an output buffer, returned to the user so the next step cannot overwrite it.

    On the CPU it is a NumPy copy: torch's multi-threaded copy leaves its OpenMP workers spinning,
    and they then fight the kernels' threads for the cores.
    """
    if tensor.device.type == "cpu":
        return torch.from_numpy(tensor.numpy().copy())
    return tensor.clone()


_CGROUP_FILES = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),  # cgroup v2
    (
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        "/sys/fs/cgroup/memory/memory.usage_in_bytes",
    ),  # cgroup v1
)


def available_cpu_memory() -> int | None:
    """Bytes this process can still allocate on the host: the least of the kernel's
    ``MemAvailable`` (free plus reclaimable cache), the room left under this cgroup's memory
    limit, and the room left under ``ulimit -v``; None when none can be read."""
    import psutil

    candidates = []
    with contextlib.suppress(OSError, RuntimeError):
        candidates.append(psutil.virtual_memory().available)
    for limit_file, usage_file in _CGROUP_FILES:
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**62:  # "max" or a huge v1 value: no limit
            candidates.append(max(int(limit) - usage, 0))
        break
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            candidates.append(max(soft - psutil.Process().memory_info().vms, 0))
    except (ImportError, OSError, ValueError):
        pass
    return min(candidates) if candidates else None


def available_memory(device: torch.device) -> int | None:
    """Bytes still free for tensors on ``device``: a GPU's free memory, the host's
    :func:`available_cpu_memory` for the CPU; None when it cannot be read."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return available_cpu_memory()
