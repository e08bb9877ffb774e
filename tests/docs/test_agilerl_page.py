"""docs/using-with-agilerl.md and its scripts (docs/examples/clients/agilerl/), checked without
AgileRL: the page names the scripts and the pins, and the scripts' Tag wrapper gives AgileRL's
vector env what it assumes (every agent in every step, no NaN, an action for every agent accepted)
where Tag alone does not (the scripts themselves run under ``.ci/client-check agilerl``)."""

import ast
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "using-with-agilerl.md"
SCRIPTS = ROOT / "docs" / "examples" / "clients" / "agilerl"


def test_the_page_is_in_the_toctree_and_names_its_scripts_and_pins():
    assert re.search(r"^using-with-agilerl$", (ROOT / "docs" / "index.md").read_text(), re.M)
    page = PAGE.read_text()
    named = set(re.findall(r"docs/examples/clients/agilerl/(\w+\.py)", page))
    assert named == {path.name for path in SCRIPTS.glob("*.py")}
    for line in (SCRIPTS / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            assert line in page, f"the page does not name the pin {line}"


def script_wrapper():
    """``LeftAgentsKept`` and ``tag_env`` as ippo_tag.py defines them (AgileRL not imported)."""
    tree = ast.parse((SCRIPTS / "ippo_tag.py").read_text())
    wanted = [
        node
        for node in tree.body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef))
        and node.name in ("LeftAgentsKept", "tag_env")
    ]
    assert len(wanted) == 2
    from pettingzoo.utils.wrappers import BaseParallelWrapper

    from gpu_envs import tag_v0
    from gpu_envs.games.tag.quick import QUICK_TAG

    namespace = {"BaseParallelWrapper": BaseParallelWrapper, "tag_v0": tag_v0}
    namespace["QUICK_TAG"] = QUICK_TAG
    exec(compile(ast.Module(wanted, type_ignores=[]), "ippo_tag.py", "exec"), namespace)
    return namespace["tag_env"]


def play_as_agilerl_does(game, seed: int) -> int:
    """Step ``game`` as AgileRL's vector env worker does (an action for every possible agent,
    reset when every reported agent is done); returns the steps in which an agent was missing."""
    rng = np.random.default_rng(seed)
    obs, _ = game.reset(seed=seed)
    missing = 0
    for _ in range(200):
        actions = {
            agent: rng.integers(0, game.action_space(agent).nvec) for agent in game.possible_agents
        }
        obs, rewards, terminations, truncations, _ = game.step(actions)
        if set(obs) != set(game.possible_agents):
            missing += 1
        assert all(np.isfinite(row).all() for row in obs.values())
        if all(terminations[a] or truncations[a] for a in terminations):
            obs, _ = game.reset()
    return missing


def test_the_wrapper_keeps_every_agent_in_every_step_and_takes_their_actions():
    tag_env = script_wrapper()
    for seed in range(3):
        assert play_as_agilerl_does(tag_env(), seed) == 0


def test_tag_alone_refuses_what_agilerl_sends():
    from gpu_envs import tag_v0
    from gpu_envs.games.tag.quick import QUICK_TAG

    with pytest.raises(ValueError, match="not in the game"):
        for seed in range(3):
            play_as_agilerl_does(tag_v0.parallel_env(**QUICK_TAG), seed)
