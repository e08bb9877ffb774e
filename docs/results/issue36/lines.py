import sys
import time

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import gpu_envs

n = int(sys.argv[1]) if len(sys.argv) > 1 else 256
env = gpu_envs.CartPoleVectorEnv(n)
env.reset(seed=0)
pool = [t for t in torch.as_tensor(np.random.default_rng(0).integers(0, 2, size=(64, n)))]
for i in range(500):
    env.step(pool[i % 64])
pc = time.perf_counter_ns
acc = [0] * 8


def step(self, actions):
    t0 = pc()
    validate = self.validate_actions
    source = None
    if self._kernel_checks_actions and not (
        validate and self.autoreset_mode is AutoresetMode.DISABLED
    ):
        source = self._action_check.in_place_source(actions)
    check = source is not None and validate
    t1 = pc()
    copy_outputs = self.copy_outputs
    recycled = self._recycled_outputs if copy_outputs else None
    before, fresh = recycled.take()
    like, after, upper = self._actions_view, self._args_after, self._action_upper
    compiled = self._cpu_step
    kind = type(source) is int
    step = compiled[kind]
    t2 = pc()
    if step(self.num_envs, before, like, after, source, upper, check):
        raise ValueError
    t3 = pc()
    outputs = tuple(map(torch.from_numpy, fresh))
    t4 = pc()
    self._tensors.update(zip(self.step_outputs, outputs))
    self._args_before, self._output_tensors = before, outputs
    self._kernel_args = (*before, self._actions_view, *self._args_after)
    t5 = pc()
    acc[0] += t1 - t0
    acc[1] += t2 - t1
    acc[2] += t3 - t2
    acc[3] += t4 - t3
    acc[4] += t5 - t4
    return outputs


N = 50000
for i in range(N):
    step(env, pool[i & 63])
acc = [0] * 8
for i in range(N):
    step(env, pool[i & 63])
for name, v in zip(
    ["action fits", "take + locals", "kernel call", "4x from_numpy", "bookkeeping"], acc
):
    print(f"{name:15s} {v / N:8.0f} ns")
