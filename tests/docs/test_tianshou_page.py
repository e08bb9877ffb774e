"""docs/using-with-tianshou.md and its script (docs/examples/clients/tianshou/), checked without
Tianshou: the page names the script and the pin, and what the page's "identical learning" rests on
holds: envs seeded as Tianshou's ``DummyVectorEnv.seed`` seeds them (``reset(seed=s + i)``), then
reset without a seed at each episode's end as its collector does, play gymnasium's own episodes
(the script itself runs under ``.ci/client-check tianshou``)."""

import re
from pathlib import Path

import gymnasium as gym
import numpy as np

import gpu_envs  # noqa: F401  (registers gpu_envs/CartPole-v1)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "using-with-tianshou.md"
SCRIPTS = ROOT / "docs" / "examples" / "clients" / "tianshou"


def test_the_page_is_in_the_toctree_and_names_its_script_and_pin():
    assert re.search(r"^using-with-tianshou$", (ROOT / "docs" / "index.md").read_text(), re.M)
    page = PAGE.read_text()
    named = set(re.findall(r"docs/examples/clients/tianshou/(\w+\.py)", page))
    assert named == {path.name for path in SCRIPTS.glob("*.py")}
    pin = (SCRIPTS / "requirements.txt").read_text().split()[0]
    assert pin.startswith("tianshou==") and pin in page


def played(task: str, seed: int, actions: np.ndarray) -> list:
    """Observations and rewards of one env seeded as Tianshou seeds slot ``seed``, stepped with
    ``actions`` and reset without a seed at each episode's end."""
    env = gym.make(task)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    trace = [obs.tolist()]
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(int(action))
        trace.append((obs.tolist(), float(reward), terminated, truncated))
        if terminated or truncated:
            obs, _ = env.reset()
            trace.append(obs.tolist())
    return trace


def test_seeded_slots_play_gymnasiums_episodes_across_resets():
    actions = np.random.default_rng(0).integers(0, 2, 600)
    for slot in range(3):
        seed = 1626 + slot  # the example's seed, slot i of DummyVectorEnv
        assert played("gpu_envs/CartPole-v1", seed, actions) == played("CartPole-v1", seed, actions)
