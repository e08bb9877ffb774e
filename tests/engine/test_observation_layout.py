"""A user env whose declared observation space does not match its observation buffers is refused
when it is built, by a message naming the env, the space's shape and dtype and the buffer's, not
with torch shape errors deep in a trainer. The env is docs/write-an-env.md's PointGoal with one
line changed, as a user edits it."""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.docs.test_write_an_env_tutorial import TUTORIAL, python_blocks

SPACE = "gym.spaces.Box(-np.inf, np.inf, (6,), np.float32)"
OBS = '"obs": ((n, 6), f32)'


@pytest.fixture
def user_env(tmp_path, monkeypatch):
    """``user_env(old, new, ...)``: the tutorial's env class with each ``old`` replaced by the
    ``new`` after it in its source, imported from a file of its own."""
    text = TUTORIAL.read_text("utf8")
    source = "\n".join(python_blocks(text[: text.index("## 3. Use it")]))  # the env's two blocks
    source = source.replace("gym.register(", "dict(")  # (the id is the tutorial's)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = []

    def make(*edits: str):
        edited = source
        for old, new in zip(edits[::2], edits[1::2]):
            assert old in edited
            edited = edited.replace(old, new)
        name = f"edited_point_goal_{len(modules)}"
        (tmp_path / f"{name}.py").write_text(edited)
        modules.append(name)
        return importlib.import_module(name).PointGoalVectorEnv

    yield make
    for name in modules:
        sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            SPACE,
            "gym.spaces.Box(-np.inf, np.inf, (7,), np.float32)",
            r"shape \(7,\) and dtype float32, but buffer_layout\(\)'s 'obs' buffer is \(8, 6\) "
            r"float32; it must be \(8, 7\) float32",
        ),
        (
            OBS,
            '"obs": ((n, 7), f32)',
            r"shape \(6,\) and dtype float32, but buffer_layout\(\)'s 'obs' buffer is \(8, 7\) "
            r"float32; it must be \(8, 6\) float32",
        ),
        (
            SPACE,
            "gym.spaces.Box(-np.inf, np.inf, (6,), np.float64)",
            r"dtype float64, but buffer_layout\(\)'s 'obs' buffer is \(8, 6\) float32",
        ),
        (
            '"final_obs": ((n, 6), f32)',
            '"final_obs": ((n, 3), f32)',
            r"'final_obs' buffer is \(8, 3\) float32; it must be \(8, 6\) float32",
        ),
    ],
)
def test_a_space_that_does_not_match_the_buffer_is_refused_naming_both(user_env, old, new, message):
    env_class = user_env(old, new)
    with pytest.raises(
        TypeError, match=rf"^PointGoalVectorEnv: single_observation_space .*{message}"
    ):
        env_class(8)


def test_an_env_without_an_observation_space_is_told_to_declare_one(user_env):
    env_class = user_env(
        f"self.single_observation_space = {SPACE}",
        "pass",
        "self.observation_space = batch_space(self.single_observation_space, num_envs)",
        "pass",
    )
    with pytest.raises(TypeError, match=r"single_observation_space must be a gymnasium space"):
        env_class(8)
