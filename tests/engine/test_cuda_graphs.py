"""The structure of the CUDA-graph rollouts, without a GPU (torch has no CUDA here).

What is proven, with fakes of ``torch.cuda``'s stream and graph API:

- :class:`gpu_envs.engine.cuda_graphs.CapturedStep` runs its warm-up steps on a side stream with
  torch's
  sync debug mode at ``"error"``, captures the step under ``torch.cuda.graph`` and replays it;
- an env on the simulated device stepped that way launches its kernel on the numba stream of the
  stream torch has current at that step (the capturing one inside the capture), and reads nothing
  back to the host inside the capture;
- the trainer's graph rollout (``trainers/cuda_graph_rollout.py``) carries the observation and
  done flags through its static tensors: two PPO iterations with it end with the eager run's
  weights.
- stale pointers cannot be replayed: new reset options and Tag's fixed start are copied into the
  device arrays the kernels (and so a graph) already read; when an env hands its kernels a new
  array or setting instead, a captured step refuses to replay and the trainer's graph rollout
  captures again.

What is not: that CUDA records these launches into a graph and that its replays give the same bits
(the fake graph calls the step again at each replay). That needs a GPU: ``gpu-envs device-check
--full`` measures graph replay and compares it with plain launches there.
"""

import contextlib
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import gpu_envs
from gpu_envs.engine import cuda_graphs, devices
from tests.engine import test_faces_on_cuda as faces
from tests.engine import test_streams as streams
from tests.helpers.host_reads import HOST_READS

pytestmark = pytest.mark.cudasim
simulator_only = pytest.mark.skipif(
    not devices.simulated_cuda(), reason="fakes torch.cuda on the simulated device"
)
stream_log = streams.stream_log  # the fixture
assert_same = faces.assert_same  # the fixture


class FakeStream:
    """A torch stream: a handle, and the streams it was told to wait for."""

    def __init__(self, handle: int):
        self.cuda_stream = handle
        self.waited: list[int] = []

    def wait_stream(self, other: "FakeStream") -> None:
        self.waited.append(other.cuda_stream)


class FakeCUDA:
    """Enough of ``torch.cuda`` for :class:`CapturedStep`: streams, a graph whose capture runs the
    step once on the capturing stream and whose replay runs it again, the sync debug mode."""

    CAPTURE = 7

    def __init__(self):
        self.current = FakeStream(0)
        self.events: list[tuple] = []
        self.sync_mode = "default"
        self.captured = None

    def install(self, patch: pytest.MonkeyPatch) -> None:
        fake = self

        class Graph:
            def replay(self):
                fake.events.append(("replay",))
                fake.captured()

        @contextlib.contextmanager
        def graph(g, pool=None):
            previous, self.current = self.current, FakeStream(self.CAPTURE)
            self.events.append(("capture begin",))
            yield
            self.events.append(("capture end",))
            self.current = previous

        @contextlib.contextmanager
        def stream(s):
            previous, self.current = self.current, s
            yield
            self.current = previous

        def set_mode(mode):
            self.events.append(("sync debug mode", mode))
            self.sync_mode = mode

        for name, value in {
            "current_stream": lambda device=None: self.current,
            "Stream": lambda device=None: FakeStream(3),
            "stream": stream,
            "graph": graph,
            "CUDAGraph": Graph,
            "get_sync_debug_mode": lambda: self.sync_mode,
            "set_sync_debug_mode": set_mode,
        }.items():
            patch.setattr(torch.cuda, name, value)


@pytest.fixture
def fake_cuda(monkeypatch):
    fake = FakeCUDA()
    fake.install(monkeypatch)
    return fake


def test_captured_step_warms_up_on_a_side_stream_then_captures_and_replays(fake_cuda):
    calls = []

    def step():
        calls.append((torch.cuda.current_stream().cuda_stream, fake_cuda.sync_mode))

    captured = cuda_graphs.CapturedStep(step, torch.device("cuda"), warmup_steps=2)
    fake_cuda.captured = step
    captured.replay()
    assert calls == [(3, "error"), (3, "error"), (FakeCUDA.CAPTURE, "default"), (0, "default")]
    assert [e[0] for e in fake_cuda.events] == [
        "sync debug mode",
        "sync debug mode",
        "capture begin",
        "capture end",
        "replay",
    ]
    assert fake_cuda.sync_mode == "default"


@simulator_only
def test_an_env_step_launches_on_the_stream_current_at_each_step(
    fake_cuda, monkeypatch, stream_log
):
    """On a GPU ``launch_stream`` is the numba stream of torch's current one; the simulated
    device has no torch stream, so it is replaced by that rule over the fake's handles."""
    from numba import cuda

    numba_streams: dict[int, object] = {}

    def launch_stream(device):
        handle = torch.cuda.current_stream(device).cuda_stream
        return numba_streams.setdefault(handle, cuda.stream())

    monkeypatch.setattr(devices, "launch_stream", launch_stream)
    env = streams.MAKE["cartpole"]("cuda", validate_actions=False)
    env.copy_outputs = False
    env.reset(seed=1)
    actions = streams.actions_of(env, np.random.default_rng(0))
    stream_log.clear()
    reads: list[str] = []

    def step():
        with monkeypatch.context() as patch:
            for name in HOST_READS:
                patch.setattr(torch.Tensor, name, lambda *a, _n=name, **k: reads.append(_n))
            env.step(actions)

    cuda_graphs.CapturedStep(step, torch.device("cuda"), warmup_steps=1)
    assert [stream for _, stream in stream_log] == [numba_streams[3], numba_streams[7]]
    assert reads == []


def test_capturable_says_why_not():
    env = streams.MAKE["cartpole"]("cpu")
    assert cuda_graphs.capturable(env) == "not on a CUDA GPU"


@simulator_only
def test_trainer_graph_rollouts_carry_the_state_like_eager_rollouts(
    tmp_path, monkeypatch, assert_same
):
    """Two PPO iterations with the graph rollout (a fake capture: the rollout runs again at each
    replay) end with the eager CPU run's weights."""
    expected = faces._trained_weights(tmp_path, "cpu")
    replays = []

    class FakeCapturedStep:
        stale = cuda_graphs.CapturedStep.stale

        def __init__(self, step, device, warmup_steps=cuda_graphs.WARMUP_STEPS, pool=None, envs=()):
            self.envs = envs
            self.generations = tuple(env.kernel_args_generation for env in envs)
            sampler = step.__self__.collector.sampler  # GraphRollout._rollout's collector's
            state = sampler.state_dict()
            with torch.random.fork_rng():  # a GPU capture runs nothing: no draw is spent
                self.outputs = step()
            sampler.load_state_dict(state)
            self.step = step

        def replay(self):
            replays.append(1)
            self.step()

    monkeypatch.setattr(cuda_graphs, "capturable", lambda env: None)
    monkeypatch.setattr(cuda_graphs, "CapturedStep", FakeCapturedStep)
    monkeypatch.setattr(gpu_envs.games.cartpole, "CartPoleVectorEnv", faces._SimulatedCartPole)
    assert_same(expected, faces._trained_weights(tmp_path, "cuda"), "weights")
    assert len(replays) == 2  # one per iteration


def _constants(env) -> list:
    """The constants the kernels read, as host arrays."""
    count = len(env.constants())
    index = len(env._layout) + 1
    return [np.asarray(a.copy_to_host()) for a in env.kernel_args[index : index + count]]


@simulator_only
@pytest.mark.parametrize("game", list(streams.GAMES))
def test_new_constants_are_copied_into_the_device_arrays_the_kernels_read(game):
    """CartPole's and Pendulum's reset bounds, Tag's fixed start at a seeded reset: new values in
    the same device arrays (the addresses a prepared launch or a graph holds)."""
    env = streams.make(game, "cuda")
    _, options = streams.GAMES[game]
    env.reset(seed=1)
    arguments, generation, before = env.kernel_args, env.kernel_args_generation, _constants(env)
    env.reset(seed=2, options=options)
    assert all(new is old for new, old in zip(env.kernel_args, arguments))
    assert env.kernel_args_generation == generation
    after = _constants(env)
    assert any(not np.array_equal(a, b) for a, b in zip(after, before))  # the values did change
    for device, host in zip(after, env.constants().values()):
        np.testing.assert_array_equal(device, host)


@simulator_only
@pytest.mark.parametrize("change", ["setting", "constant shape"])
def test_a_graph_refuses_to_replay_an_envs_old_kernel_arguments(fake_cuda, monkeypatch, change):
    env = streams.MAKE["cartpole"]("cuda", validate_actions=False)
    env.copy_outputs = False
    env.reset(seed=1)
    actions = streams.actions_of(env, np.random.default_rng(0))
    captured = cuda_graphs.CapturedStep(
        lambda: env.step(actions), torch.device("cuda"), warmup_steps=1, envs=(env,)
    )
    fake_cuda.captured = lambda: env.step(actions)
    captured.replay()
    env.reset(seed=2, options={"low": -0.01, "high": 0.01})  # copied in place: still valid
    captured.replay()
    if change == "setting":
        settings = env.settings()
        monkeypatch.setattr(env, "settings", lambda: {**settings, "max_episode_steps": 99})
    else:
        constants = env.constants()
        monkeypatch.setattr(env, "constants", lambda: {**constants, "reset_bounds": np.zeros(4)})
    env.update_constants()
    with pytest.raises(cuda_graphs.StaleGraphError, match="CartPoleVectorEnv gave its kernels"):
        captured.replay()
    assert [e for e in fake_cuda.events if e[0] == "replay"] == [("replay",)] * 2


def test_the_graph_rollout_captures_again_when_the_kernel_arguments_change(monkeypatch):
    """No warm-up steps the second time: they would advance the run."""
    from gpu_envs.trainers import cuda_graph_rollout

    captures: list[int] = []

    class FakeCapturedStep:
        stale = cuda_graphs.CapturedStep.stale

        def __init__(self, step, device, warmup_steps=cuda_graphs.WARMUP_STEPS, pool=None, envs=()):
            captures.append(warmup_steps)
            self.envs, self.replays = envs, 0
            self.generations = tuple(env.kernel_args_generation for env in envs)

        def replay(self):
            self.replays += 1

    monkeypatch.setattr(cuda_graphs, "CapturedStep", FakeCapturedStep)
    env = SimpleNamespace(kernel_args_generation=0, copy_outputs=True)
    obs = torch.zeros(2, 3)
    game = SimpleNamespace(env=env, reset=lambda seed: obs)
    timer = SimpleNamespace(phase=lambda name: contextlib.nullcontext())
    collector = SimpleNamespace(
        game=game, timer=timer, prev_done=torch.zeros(2, dtype=torch.bool), obs=obs, buffers={}
    )
    rollout = cuda_graph_rollout.GraphRollout(collector)
    collector.graph = rollout
    rollout.capture()
    first = rollout.graph
    rollout.replay()
    env.kernel_args_generation += 1
    rollout.replay()
    rollout.replay()
    assert captures == [cuda_graphs.WARMUP_STEPS, 0]
    assert (first.replays, rollout.graph.replays) == (1, 2)
