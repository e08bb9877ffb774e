"""Host operations of one step on the simulated CUDA device: what a GPU step asks of the host.

Counted per step, with actions already on the env's device and ``validate_actions=False``:

- numba launches (the simulator's kernel launches) and numba host-device copies;
- torch operations (every ATen call but the views, which launch nothing: each is a kernel launch
  or a copy on a GPU), recorded with a ``TorchDispatchMode``, and the copies of the outputs
  (``devices.fresh_copy``: a torch ``clone`` on a GPU, a NumPy copy for the simulated device's CPU
  tensors, so counted on their own);
- host synchronisations: reads of tensor values and ``cuda.synchronize``.

The lean path (``copy_outputs=False``) costs two operations: the copy of the actions into the
action buffer and the one launch; the default path adds one copy per output. The counts are stated
in docs/cuda.md.
"""

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gpu_envs.engine import devices
from tests.engine import test_streams as streams
from tests.helpers.host_reads import HOST_READS

pytestmark = [
    pytest.mark.cudasim,
    pytest.mark.skipif(not devices.simulated_cuda(), reason="counts the simulator's operations"),
]
stream_log = streams.stream_log  # the fixture: numba launches, copies and syncs


class TorchOps(TorchDispatchMode):
    """Records the ATen operations run inside it, views left out."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and func is not torch.ops.aten.detach.default:
            self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def host_operations(env, actions, stream_log) -> dict[str, list[str]]:
    """The operations of one ``env.step(actions)`` by kind."""
    stream_log.clear()
    reads: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        for name in HOST_READS:
            method = getattr(torch.Tensor, name)
            patch.setattr(
                torch.Tensor,
                name,
                lambda tensor, *a, _n=name, _m=method, **k: reads.append(_n) or _m(tensor, *a, **k),
            )
        copies: list[str] = []
        copy = devices.fresh_copy
        patch.setattr(devices, "fresh_copy", lambda t: copies.append("clone") or copy(t))
        with TorchOps() as torch_ops:
            env.step(actions)
    numba_ops = [what for what, _ in stream_log]
    return {
        "launches": [op for op in numba_ops if op.startswith("launch")],
        "numba copies": [op for op in numba_ops if not op.startswith(("launch", "synchronize"))],
        "torch ops": torch_ops.ops + copies,
        "syncs": reads + [op for op in numba_ops if op == "synchronize"],
    }


#: Copies a game's ``step_info`` makes whatever ``copy_outputs`` says (Tag's ``info["active"]``).
INFO_COPIES = {"tag": 1}


def expected(game: str, env, copy_outputs: bool) -> dict[str, int]:
    """Operations per step by kind (no validation, actions on the device): one launch, the copy of
    the actions and, with ``copy_outputs``, one copy per output."""
    copies = (len(env.step_outputs) if copy_outputs else 0) + INFO_COPIES.get(game, 0)
    return {"launches": 1, "numba copies": 0, "torch ops": 1 + copies, "syncs": 0}


@pytest.mark.parametrize("copy_outputs", [False, True])
@pytest.mark.parametrize("game", list(streams.MAKE))
def test_host_operations_per_step(game, copy_outputs, stream_log):
    env = streams.MAKE[game]("cuda", validate_actions=False)
    env.copy_outputs = copy_outputs
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(streams.STEPS):
        ops = host_operations(env, streams.actions_of(env, rng), stream_log)
        counts = {kind: len(found) for kind, found in ops.items()}
        assert counts == expected(game, env, copy_outputs), ops
