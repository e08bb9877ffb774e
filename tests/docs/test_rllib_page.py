"""docs/using-with-rllib.md and its scripts (docs/examples/clients/rllib/), checked without Ray:
the page shows the scripts' own env lines, and the calls RLlib's env runners make with them work in
a fresh interpreter that never imported gpu_envs (the scripts themselves run under
``.ci/client-check rllib``, in a venv with Ray)."""

import ast
import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "using-with-rllib.md"
SCRIPTS = ROOT / "docs" / "examples" / "clients" / "rllib"


def constants(script: str) -> dict:
    """The script's module-level constants (``NAME = literal``)."""
    tree = ast.parse((SCRIPTS / script).read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(ValueError):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def keywords(script: str, method: str) -> dict:
    """The literal keywords (and first positional argument, as ``""``) of the script's call of
    ``.method(...)``, names of its constants resolved."""
    names = constants(script)
    for node in ast.walk(ast.parse((SCRIPTS / script).read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == method
        ):
            values = {k.arg: k.value for k in node.keywords}
            if node.args:
                values[""] = node.args[0]
            return {
                key: names[value.id] if isinstance(value, ast.Name) else ast.literal_eval(value)
                for key, value in values.items()
            }
    raise AssertionError(f"{script} calls no .{method}(...)")


def test_the_page_is_in_the_toctree_and_names_every_script_that_exists():
    assert re.search(r"^using-with-rllib$", (ROOT / "docs" / "index.md").read_text(), re.M)
    page = PAGE.read_text()
    named = set(re.findall(r"`(?:docs/examples/clients/rllib/)?(\w+\.py)`", page))
    assert {"ppo_cartpole.py", "ppo_cartpole_batched.py", "ppo_cartpole_speed.py"} <= named
    for script in named:
        assert (SCRIPTS / script).is_file(), f"the page names {script}, which does not exist"
    pin = (SCRIPTS / "requirements.txt").read_text().split("ray[rllib]==")[1].split()[0]
    assert f"ray[rllib]=={pin}" in page


def test_the_page_shows_the_env_lines_of_its_scripts():
    page = PAGE.read_text()
    single = constants("ppo_cartpole.py")["ENV"]
    assert single == "gpu_envs:gpu_envs/CartPole-v1"
    assert f'.environment("{single}")' in page
    batched = keywords("ppo_cartpole_batched.py", "env_runners")
    assert batched["gym_env_vectorize_mode"] == "vector_entry_point"
    assert 'gym_env_vectorize_mode="vector_entry_point"' in page
    env_config = keywords("ppo_cartpole_batched.py", "environment")["env_config"]
    assert f"env_config={env_config}".replace("'", '"') in page


# What RLlib's SingleAgentEnvRunner.make_env does with the config's env (ray 2.60), in a process
# that imported gymnasium but never gpu_envs.
RUNNER = """
import json, sys
import gymnasium as gym
from gymnasium.wrappers.vector import DictInfoToList
env_id, num_envs, mode, env_config = json.loads(sys.argv[1])
try:
    env = DictInfoToList(gym.make_vec(env_id, num_envs=num_envs,
                                      vectorization_mode=gym.VectorizeMode(mode), **env_config))
except gym.error.Error as error:
    print(json.dumps({"error": type(error).__name__}))
    raise SystemExit
obs, _ = env.reset(seed=0)
obs, rewards, terminated, truncated, infos = env.step(env.action_space.sample())
arrays = (obs, rewards, terminated, truncated)
print(json.dumps({"types": sorted({type(x).__name__ for x in arrays}),
                  "shape": list(obs.shape), "unwrapped": type(env.unwrapped).__module__,
                  "infos": len(infos)}))
"""


def make_in_a_runner(env_id: str, num_envs: int, mode: str, env_config: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps([env_id, num_envs, mode, env_config])],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script", ["ppo_cartpole.py", "ppo_cartpole_speed.py"])
def test_the_scripts_env_id_makes_the_env_in_a_runner_that_never_imported_gpu_envs(script):
    names = constants(script)
    env_id = names.get("ENV", names.get("OURS"))
    made = make_in_a_runner(env_id, 1, "sync", {})
    assert made["types"] == ["ndarray"] and made["shape"] == [1, 4]
    plain = env_id.split(":", 1)[1]
    assert make_in_a_runner(plain, 1, "sync", {}) == {"error": "NamespaceNotFound"}


def test_the_batched_scripts_call_hands_rllib_our_batched_env_with_numpy_arrays():
    runners = keywords("ppo_cartpole_batched.py", "env_runners")
    environment = keywords("ppo_cartpole_batched.py", "environment")
    made = make_in_a_runner(
        environment[""],
        runners["num_envs_per_env_runner"],
        runners["gym_env_vectorize_mode"],
        environment["env_config"],
    )
    assert made == {
        "types": ["ndarray"],
        "shape": [runners["num_envs_per_env_runner"], 4],
        "unwrapped": "gpu_envs.games.cartpole",  # our batch, not a SyncVectorEnv of single envs
        "infos": runners["num_envs_per_env_runner"],
    }
