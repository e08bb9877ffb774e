"""Run PureJaxRL's CartPole PPO (``purejaxrl/ppo.py``) once and print one JSON line: run by
``gpu_envs.benchmarks.train_cartpole_purejaxrl`` under PureJaxRL's own interpreter (JAX, flax,
optax, distrax, gymnax), so it imports nothing of gpu_envs.

    python purejaxrl_child.py PUREJAXRL_DIR SEED

``PUREJAXRL_DIR`` is a checkout's ``purejaxrl/`` folder (``ppo.py``, ``wrappers.py``). The config
is ``ppo.py``'s own ``__main__`` config (CartPole-v1, 4 envs x 128 steps, 5e5 steps) without its
debug printing. The whole training is one jitted program: it is compiled first (timed apart), then
run; the curve is PureJaxRL's own (``returned_episode_returns`` averaged over the envs and the
steps of each update). Time to 475 is the run's seconds times the share of the updates up to the
first one whose curve point reaches 475 (one program: no partial timing exists).
"""

import json
import sys
import time
import types
from importlib.metadata import version
from typing import Any

THRESHOLD = 475.0
CONFIG: dict[str, Any] = {  # purejaxrl/ppo.py's __main__ config, DEBUG off
    "LR": 2.5e-4,
    "NUM_ENVS": 4,
    "NUM_STEPS": 128,
    "TOTAL_TIMESTEPS": 5e5,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True,
    "DEBUG": False,
}


def _stub_unused_imports() -> None:
    """``wrappers.py`` imports brax and navix for wrappers CartPole does not use."""
    for name in ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training", "navix"):
        sys.modules.setdefault(name, types.ModuleType(name))
    vars(sys.modules["brax"]).update(envs=sys.modules["brax.envs"])
    vars(sys.modules["brax.envs.wrappers.training"]).update(
        EpisodeWrapper=object, AutoResetWrapper=object
    )


def _five_value_steps() -> None:
    """gymnax >= 1 steps return (obs, state, reward, terminated, truncated, info); PureJaxRL's
    wrappers unpack 0.0.x's (obs, state, reward, done, info): give them ``done``."""
    import gymnax

    if int(version("gymnax").split(".")[0]) < 1:
        return
    make = gymnax.make

    def make_five(name, **kwargs):
        env, params = make(name, **kwargs)
        step_six = env.step

        def step(key, state, action, params=None):
            obs, state, reward, terminated, truncated, info = step_six(key, state, action, params)
            return obs, state, reward, terminated | truncated, info

        env.step = step
        return env, params

    gymnax.make = make_five


def main(folder: str, seed: int) -> dict:
    """Compile and run PureJaxRL's training from ``folder`` with ``seed``: the record above."""
    sys.path.insert(0, folder)
    _stub_unused_imports()
    _five_value_steps()
    import jax
    import numpy as np
    import ppo

    train = jax.jit(ppo.make_train(dict(CONFIG)))
    key = jax.random.PRNGKey(seed)
    start = time.perf_counter()
    compiled = train.lower(key).compile()
    compiled_at = time.perf_counter()
    out = jax.block_until_ready(compiled(key))
    run_s = time.perf_counter() - compiled_at
    curve = np.asarray(out["metrics"]["returned_episode_returns"]).mean(axis=(1, 2))
    steps_per_update = CONFIG["NUM_ENVS"] * CONFIG["NUM_STEPS"]
    total_steps = len(curve) * steps_per_update
    first = next((u for u, value in enumerate(curve) if value >= THRESHOLD), None)
    return dict(
        seed=seed,
        compile_s=compiled_at - start,
        total_train_s=run_s,
        total_steps=total_steps,
        env_steps_per_s=total_steps / run_s,
        steps=None if first is None else (first + 1) * steps_per_update,
        train_s=None if first is None else run_s * (first + 1) / len(curve),
        best_eval=float(curve.max()),
        versions={name: version(name) for name in ("jax", "jaxlib", "flax", "optax", "gymnax")},
        jax_devices=[str(device) for device in jax.devices()],
    )


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
