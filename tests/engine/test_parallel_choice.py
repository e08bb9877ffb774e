"""The CPU step's choice between the parallel and the serial loop (``kernels.cpu.AdaptiveStep``),
on a fake clock: no timing of real code."""

import numba
import numpy as np
import pytest
import torch

import gpu_envs
from gpu_envs.kernels import cpu
from gpu_envs.kernels.cpu import AdaptiveStep, LoopChoice


class FakeLoops:
    """Two loops that record their calls and advance a fake clock by their current cost."""

    def __init__(self, parallel_ns: int, serial_ns: int):
        self.now = 0
        self.cost = {"parallel": parallel_ns, "serial": serial_ns}
        self.calls: list[str] = []

    def clock(self) -> int:
        return self.now

    def loop(self, name: str):
        def run(*arguments) -> bool:
            self.calls.append(name)
            self.now += self.cost[name]
            return arguments == ("bad",)

        return run

    def adaptive(self, **kwargs) -> AdaptiveStep:
        return AdaptiveStep(self.loop("parallel"), self.loop("serial"), self.clock, **kwargs)


def test_the_serial_loop_takes_over_while_the_parallel_one_stalls_and_gives_back_after():
    loops = FakeLoops(parallel_ns=2_000_000, serial_ns=100_000)  # a descheduled worker: 20x
    step = loops.adaptive(probe_interval_ns=10_000_000)
    for _ in range(AdaptiveStep.FIRST_PROBE_AFTER + 3):
        step("ok")
    assert not step.parallel_runs
    assert loops.calls[-4:] == ["parallel", "parallel", "serial", "serial"]
    loops.calls.clear()
    for _ in range(2 * 103):
        step("ok")
    # between comparisons only the serial loop runs: a comparison every 10 ms / 0.1 ms = 100
    # serial calls (plus its own 3), and each costs two parallel calls
    assert loops.calls.count("parallel") == 4
    loops.cost["parallel"] = 50_000  # the load went away: the parallel loop is faster again
    for _ in range(200):
        step("ok")
    assert step.parallel_runs
    loops.calls.clear()
    for _ in range(50):
        step("ok")
    assert set(loops.calls) == {"parallel"}


def test_a_loop_that_is_not_clearly_faster_does_not_take_over():
    loops = FakeLoops(parallel_ns=100_000, serial_ns=95_000)  # 5 % faster: inside the margin
    step = loops.adaptive(probe_interval_ns=1_000_000)
    for _ in range(500):
        step("ok")
    assert step.parallel_runs
    # the comparisons stay rare: at most 2 serial calls per ~10 parallel ones (interval floor)
    assert loops.calls.count("serial") <= 2 * (500 // AdaptiveStep.MIN_CALLS + 1)


def test_every_call_runs_exactly_one_loop_and_returns_its_result():
    loops = FakeLoops(parallel_ns=1_000, serial_ns=3_000)
    step = loops.adaptive(probe_interval_ns=20_000)
    results = [step("bad" if i % 7 == 0 else "ok") for i in range(300)]
    assert len(loops.calls) == 300
    assert results == [i % 7 == 0 for i in range(300)]


def test_a_new_step_of_a_known_size_starts_on_the_chosen_loop_and_still_compares():
    loops, choice = FakeLoops(parallel_ns=2_000_000, serial_ns=100_000), LoopChoice()
    first = loops.adaptive(probe_interval_ns=10_000_000, choice=choice)
    for _ in range(AdaptiveStep.FIRST_PROBE_AFTER + 3):
        first("ok")
    assert choice == LoopChoice(parallel=False, calls=100)  # 10 ms at 0.1 ms per serial call
    loops.calls.clear()
    second = loops.adaptive(probe_interval_ns=10_000_000, choice=choice)
    assert not second.parallel_runs
    for _ in range(99):  # no re-timing at the start: the first comparison is an interval away
        second("ok")
    assert set(loops.calls) == {"serial"}
    loops.cost["parallel"] = 50_000  # the load went away
    for _ in range(4):
        second("ok")
    assert loops.calls[-4:] == ["serial", "serial", "parallel", "parallel"]
    assert second.parallel_runs and choice.parallel and choice.calls == 200
    assert first.parallel_runs is False  # a running step keeps its own loop until it compares


def test_a_pinned_step_runs_one_loop_and_never_compares():
    loops, choice = FakeLoops(parallel_ns=2_000_000, serial_ns=100_000), LoopChoice()
    step = loops.adaptive(probe_interval_ns=10_000_000, choice=choice)
    step.pin(parallel=True)
    for _ in range(500):
        step("ok")
    assert set(loops.calls) == {"parallel"} and choice == LoopChoice()


needs_threads = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2, reason="one numba thread: serial only"
)


def chooser_of(env) -> AdaptiveStep:
    """The env's step chooser (made at its first step with a tensor)."""
    env.reset(seed=0)
    env.step(torch.zeros(env.num_envs, dtype=torch.int64))
    chooser = env._cpu_step[1]
    assert isinstance(chooser, AdaptiveStep)
    return chooser


@needs_threads
def test_envs_of_one_size_and_dtype_share_the_choice_across_the_process(monkeypatch):
    monkeypatch.setattr(cpu, "_LOOP_CHOICES", {})
    first = chooser_of(gpu_envs.CartPoleVectorEnv(4096))
    assert first.parallel_runs and first.choice == LoopChoice()
    first.choice.parallel, first.choice.calls = False, 300  # as a comparison leaves it
    again = chooser_of(gpu_envs.CartPoleVectorEnv(4096))
    assert again.choice is first.choice and not again.parallel_runs
    assert again._countdown == 300 - 1  # its first comparison one interval on (1 step made)
    for other in (
        gpu_envs.CartPoleVectorEnv(4097),
        gpu_envs.CartPoleVectorEnv(4096, dtype=torch.float32),
    ):
        chooser = chooser_of(other)
        assert chooser.choice is not first.choice and chooser.parallel_runs


@needs_threads
def test_the_env_steps_on_the_same_bits_whichever_loop_the_chooser_picks():
    generator = np.random.default_rng(0)
    actions = [torch.from_numpy(generator.integers(0, 2, 4096)) for _ in range(60)]
    env, reference = (gpu_envs.CartPoleVectorEnv(4096, max_episode_steps=40) for _ in range(2))
    env.reset(seed=1)
    reference.reset(seed=1)
    for index, step_actions in enumerate(actions):
        if index == 1:
            chooser = env._cpu_step[1]
            assert isinstance(chooser, AdaptiveStep) and chooser.parallel_runs
        if index in (10, 30):  # the serial loop takes over, then the parallel one again
            chooser._current = chooser._loops[index == 30]
        got, expected = env.step(step_actions), reference.step(step_actions)
        assert all(torch.equal(g, e) for g, e in zip(got[:4], expected[:4]))
