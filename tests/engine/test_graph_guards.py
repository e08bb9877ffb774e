"""The guards of a CUDA-graph capture and replay (issue 46), with the fakes of ``torch.cuda`` of
``test_cuda_graphs`` on the simulated device:

- numba's deallocations are deferred around the capture (a ``cuMemFree`` flushed by the garbage
  collector inside it would invalidate the capture);
- the env's launch is prepared before the capture, also when it has no warm-up steps (a capture
  again after new kernel arguments), not inside it;
- a step captured with an env refuses to replay once that env is closed (freed buffers).
"""

import contextlib

import numpy as np
import pytest
import torch
from numba import cuda

from gpu_envs.engine import cuda_graphs
from tests.engine import test_cuda_graphs as graphs
from tests.engine import test_streams as streams

pytestmark = [pytest.mark.cudasim, graphs.simulator_only]
fake_cuda = graphs.fake_cuda  # the fixture


def _lean_cartpole():
    env = streams.MAKE["cartpole"]("cuda", validate_actions=False)
    env.copy_outputs = False
    env.reset(seed=1)
    return env, streams.actions_of(env, np.random.default_rng(0))


def test_numba_frees_nothing_during_the_capture(fake_cuda, monkeypatch):
    @contextlib.contextmanager
    def defer_cleanup():
        fake_cuda.events.append(("frees deferred",))
        yield
        fake_cuda.events.append(("frees allowed",))

    monkeypatch.setattr(cuda, "defer_cleanup", defer_cleanup)
    cuda_graphs.CapturedStep(lambda: None, torch.device("cuda"), warmup_steps=1)
    assert [e[0] for e in fake_cuda.events if "sync" not in e[0]] == [
        "frees deferred",
        "capture begin",
        "capture end",
        "frees allowed",
    ]


def test_the_launch_is_prepared_before_a_capture_without_warm_up(fake_cuda, monkeypatch):
    env, actions = _lean_cartpole()
    env.step(actions)
    env.update_constants()  # (as after new kernel arguments: the launch is prepared again)
    driver_class = type(env._driver)
    prepare = driver_class.prepare_step

    def logged_prepare(driver, *args, **kwargs):
        fake_cuda.events.append(("prepare",))
        return prepare(driver, *args, **kwargs)

    monkeypatch.setattr(driver_class, "prepare_step", logged_prepare)
    cuda_graphs.CapturedStep(lambda: env.step(actions), env.device, warmup_steps=0, envs=(env,))
    assert [e[0] for e in fake_cuda.events if "sync" not in e[0]] == [
        "prepare",
        "capture begin",
        "capture end",
    ]


def test_a_graph_of_a_closed_env_refuses_to_replay(fake_cuda):
    env, actions = _lean_cartpole()
    captured = cuda_graphs.CapturedStep(
        lambda: env.step(actions), env.device, warmup_steps=1, envs=(env,)
    )
    fake_cuda.captured = lambda: None  # (a GPU replays the graph, not the Python step)
    captured.replay()
    env.close()
    with pytest.raises(cuda_graphs.StaleGraphError, match="CartPoleVectorEnv was closed after"):
        captured.replay()
    assert [e for e in fake_cuda.events if e[0] == "replay"] == [("replay",)]
