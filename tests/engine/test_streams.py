"""The engine's CUDA work is ordered on torch's current stream and a step waits for the device at
most once.

Streams: every kernel launch and every constant copy goes to ``devices.launch_stream(device)``, the
numba stream of torch's current one.

Under the simulator torch has no CUDA stream, so ``launch_stream`` is replaced by a non-default
simulator stream and the simulator's launches and copies are recorded: a reset (with options that
copy new constants), steps and partial resets of each game must all use that stream, and the
outputs must still be the CPU env's. A launch or copy left on the default stream (numba's ``0``, or
any other stream object) fails the test. On a GPU, the envs run under a non-default torch stream.

Host reads: with actions on the env's device, a step reads nothing back to the host without action
validation and one value with it (the action check and DISABLED mode's finished-env check share
it), counted on the tensor methods that read (``bool``, ``item``, ``tolist``, ``cpu``, ...).
"""

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_envs.engine import devices
from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.pendulum import PendulumVectorEnv
from gpu_envs.games.tag.env import TagEnv
from tests.engine import test_faces_on_cuda as faces
from tests.helpers import host_reads

pytestmark = pytest.mark.cudasim
assert_same = faces.assert_same  # the fixture
count_host_reads = host_reads.count_host_reads  # the fixture
simulator_only = pytest.mark.skipif(
    not devices.simulated_cuda(), reason="records the simulator's launches"
)

#: game -> make(device, **keywords): a small env of the game.
MAKE = {
    "cartpole": lambda device, **kw: CartPoleVectorEnv(
        4, device, dtype=torch.float32, max_episode_steps=3, **kw
    ),
    "pendulum": lambda device, **kw: PendulumVectorEnv(
        3, device, dtype=torch.float64, max_episode_steps=3, **kw
    ),
    "tag": lambda device, **kw: TagEnv(2, device, **faces.TAG, **kw),
}
#: game -> (keywords, reset options that change the constants the kernels read). Tag's "fixed"
#: reset mode draws the shared start state at the seeded reset and copies it as a constant.
GAMES = {
    "cartpole": ({"autoreset_mode": "disabled"}, {"low": -0.1, "high": 0.1}),
    "pendulum": ({"autoreset_mode": "same_step"}, {"x_init": 3.0, "y_init": 1.0}),
    "tag": ({"reset_mode": "fixed"}, {}),
}
STEPS = 5


def make(game: str, device: str):
    keywords, _ = GAMES[game]
    return MAKE[game](device, **keywords)


def actions_of(env, rng: np.random.Generator) -> torch.Tensor:
    """Random valid actions for one step of ``env``, on its device."""
    batch = (env.num_envs, env.num_agents) if isinstance(env, TagEnv) else (env.num_envs,)
    return torch.from_numpy(faces.sample_actions(rng, env.single_action_space, batch)).to(
        env.device
    )


def reset_finished(env) -> list:
    """In DISABLED mode, reset the envs that finished (by mask); the reset's output, if any."""
    ended = env.state_snapshot()["needs_reset"]
    if env.autoreset_mode == AutoresetMode.DISABLED and bool(ended.any()):
        return [env.reset(options={"reset_mask": ended})]
    return []


def play(env, options: dict) -> list:
    """A seeded reset with ``options``, then steps, each followed by :func:`reset_finished`.
    Returns every output."""
    outputs = [env.reset(seed=5, options=options)]
    rng = np.random.default_rng(0)
    for _ in range(STEPS):
        outputs.append(env.step(actions_of(env, rng)))
        outputs.extend(reset_finished(env))
    return outputs


@pytest.fixture
def stream_log(monkeypatch):
    """Records ``(what, stream)`` for each simulated kernel launch, host-device copy and
    synchronisation. The copies the simulator makes itself while it runs a kernel (the write-back
    of a NumPy array passed as an argument, a device view on a GPU) are not the engine's and are
    left out."""
    from numba import cuda
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    log: list[tuple[str, object]] = []
    configure = FakeCUDAKernel.__getitem__

    def launch(kernel, configuration):
        stream = configuration[2] if len(configuration) > 2 else 0
        log.append((f"launch {kernel.fn.__name__}", stream))
        return configure(kernel, configuration)

    run, running = FakeCUDAKernel.__call__, []

    def run_kernel(kernel, *args):
        running.append(kernel)
        try:
            return run(kernel, *args)
        finally:
            running.pop()

    to_device = cuda.to_device

    def copy(array, stream=0, copy=True, to=None):
        log.append(("to_device", stream))
        return to_device(array, stream=stream, copy=copy, to=to)

    def recorded(name, method):
        def call(self, ary=None, stream=0):
            if not running:
                log.append((name, stream))
            return method(self, ary, stream=stream)

        return call

    monkeypatch.setattr(FakeCUDAKernel, "__getitem__", launch)
    monkeypatch.setattr(FakeCUDAKernel, "__call__", run_kernel)
    monkeypatch.setattr(cuda, "to_device", copy)
    for name in ("copy_to_host", "copy_to_device"):
        monkeypatch.setattr(FakeCUDAArray, name, recorded(name, getattr(FakeCUDAArray, name)))
    monkeypatch.setattr(cuda, "synchronize", lambda: log.append(("synchronize", None)))
    return log


def off_stream(log: list, stream) -> list[str]:
    """The recorded operations that did not go to ``stream``."""
    return [what for what, used in log if used is not stream]


@simulator_only
@pytest.mark.parametrize("game", list(GAMES))
def test_launches_and_copies_go_to_the_launch_stream(
    game, monkeypatch, stream_log, assert_same, assert_envs_match
):
    from numba import cuda

    options = GAMES[game][1]
    cpu = make(game, "cpu")
    expected = play(cpu, options)
    stream = cuda.stream()
    monkeypatch.setattr(devices, "launch_stream", lambda device: stream)
    sim = make(game, "cuda")
    assert_same(expected, play(sim, options), "outputs")
    assert_envs_match(cpu, sim, "the end")
    assert not off_stream(stream_log, stream), f"not on the launch stream: {stream_log}"
    done = [what for what, _ in stream_log]
    assert sum(what.endswith("_step_kernel") for what in done) == STEPS
    assert any(what.endswith("_reset_kernel") for what in done)
    # The constants at construction, and again (into the same device arrays) after the reset's
    # options (or fixed start).
    assert done.count("to_device") + done.count("copy_to_device") >= 2 * len(cpu.constants())


@simulator_only
def test_a_reset_on_the_default_stream_is_caught(monkeypatch, stream_log):
    """The check above can fail: with the reset kernels launched on the default stream (as an
    engine that forgot the stream would), exactly those launches are reported."""
    from numba import cuda

    from gpu_envs.kernels.cuda import CUDADriver

    stream, reset = cuda.stream(), CUDADriver.reset
    monkeypatch.setattr(devices, "launch_stream", lambda device: stream)
    monkeypatch.setattr(
        CUDADriver,
        "reset",
        lambda driver, num_envs, mask, args, num_agents=1, stream=0: reset(
            driver, num_envs, mask, args, num_agents
        ),
    )
    play(make("cartpole", "cuda"), GAMES["cartpole"][1])
    off = off_stream(stream_log, stream)
    assert off and all(what.endswith("_reset_kernel") for what in off)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("game", list(GAMES))
def test_on_a_gpu_the_envs_follow_a_non_default_torch_stream(game, assert_same):
    options = GAMES[game][1]
    expected = play(make(game, "cpu"), options)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        actual = play(make(game, "cuda"), options)
    side.synchronize()
    assert_same(expected, actual, "outputs")


# ------------------------------------------------------------------------ host reads per step
@pytest.mark.parametrize("validate", [False, True])
@pytest.mark.parametrize("mode", ["next_step", "disabled"])
@pytest.mark.parametrize("game", list(MAKE))
def test_a_step_reads_back_nothing_or_once_with_validation(game, mode, validate, count_host_reads):
    """Actions on the env's device: no host read without validation; with it, the action check
    and DISABLED mode's finished-env check share one."""
    env = MAKE[game]("cuda", autoreset_mode=mode, validate_actions=validate)
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        _, reads = count_host_reads(env.step, actions_of(env, rng))
        assert len(reads) == int(validate), f"step {step} read back {reads}"
        reset_finished(env)


#: game -> a bad entry written into valid actions.
#: (where, value, what the error says): a torque out of range is clipped, so Pendulum's is NaN.
BAD_ACTION = {
    "cartpole": (0, 2, "out of range"),
    "pendulum": ((0, 0), float("nan"), "must be finite"),
    "tag": ((0, 0, 0), 99, "out of range"),
}


@pytest.mark.parametrize("game", list(MAKE))
def test_the_shared_read_raises_the_action_error_first(game):
    env = MAKE[game]("cuda", autoreset_mode="disabled")
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    while not bool(env.state_snapshot()["needs_reset"].any()):
        env.step(actions_of(env, rng))
    actions = actions_of(env, rng)
    where, value, message = BAD_ACTION[game]
    actions[where] = value
    with pytest.raises(ValueError, match=message):
        env.step(actions)
    with pytest.raises(RuntimeError, match="finished and were not reset"):
        env.step(actions_of(env, rng))
