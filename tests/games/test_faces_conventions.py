"""The conventions of the faces: PettingZoo's own test functions on tag_v0 (max_cycles, render
modes,
seeding, API), and gym.make of the vector-only Tag id."""

import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo.test import max_cycles_test, parallel_api_test, parallel_seed_test, render_test

from gpu_envs import tag_v0
from gpu_envs.games.tag.gym_vector import TagGymVectorEnv

SMALL = dict(num_taggers=2, num_runners=3, grid_length=10.0)


def test_pettingzoo_parallel_api_test():
    parallel_api_test(tag_v0.parallel_env(max_cycles=30, **SMALL), num_cycles=200)


def test_pettingzoo_parallel_seed_test():
    parallel_seed_test(lambda: tag_v0.parallel_env(**SMALL), num_cycles=100)


def test_pettingzoo_max_cycles_test():
    max_cycles_test(tag_v0)


def test_pettingzoo_render_test(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    monkeypatch.setattr("sys.platform", "linux")  # headless, whatever the test machine
    render_test(lambda render_mode: tag_v0.env(render_mode=render_mode, **SMALL))


def play(env, steps, seed=0):
    env.reset(seed=seed)
    for _ in range(steps):
        if not env.agents:
            break
        out = env.step({a: env.action_space(a).sample() for a in env.agents})
    return out


def test_max_cycles_truncates_and_leaves_episode_length_alone():
    env = tag_v0.parallel_env(max_cycles=3, episode_length=50, **SMALL)
    env.reset(seed=1)
    for cycle in range(1, 4):
        live = list(env.agents)
        _, _, terminations, truncations, _ = env.step(
            {a: env.action_space(a).sample() for a in live}
        )
        assert all(truncations[a] == (cycle == 3 and not terminations[a]) for a in live)
    assert env.agents == [] and any(truncations.values())
    assert env._game.episode_length == 50
    env.reset(seed=1)
    assert len(env.agents) == 5  # a reset restarts the count


def test_without_max_cycles_the_game_ends_by_its_rule():
    env = tag_v0.parallel_env(episode_length=6, **SMALL)
    _, _, terminations, truncations, _ = play(env, 6)
    assert env.agents == [] and all(terminations.values()) and not any(truncations.values())


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_max_cycles_is_checked(bad):
    with pytest.raises(ValueError, match="max_cycles"):
        tag_v0.parallel_env(max_cycles=bad)


def test_human_render_is_headless_safe(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    env = tag_v0.parallel_env(render_mode="human", **SMALL)
    env.reset(seed=0)
    assert env.render() is None and env._window is None
    first = env.last_frame.copy()
    play(env, 5)
    env.render()
    assert env.last_frame.shape == first.shape and env.last_frame.dtype == np.uint8
    assert not np.array_equal(first, env.last_frame)
    env.close()


def test_human_render_opens_a_window_where_sdl_can(monkeypatch):
    pygame = pytest.importorskip("pygame")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    env = tag_v0.parallel_env(render_mode="human", **SMALL)
    env.reset(seed=0)
    assert env.render() is None and env._window is not None
    assert pygame.display.get_surface().get_size() == env.last_frame.shape[1::-1]
    env.close()
    assert not pygame.display.get_init()


def test_unknown_render_mode_is_refused():
    with pytest.raises(ValueError, match="render_mode"):
        tag_v0.parallel_env(render_mode="ansi")


def test_gym_make_of_tag_names_the_alternatives():
    with pytest.raises(gym.error.Error) as caught:
        gym.make("gpu_envs/Tag-v0")
    message = str(caught.value)
    assert (
        "gym.make_vec('gpu_envs/Tag-v0'" in message and "gpu_envs.tag_v0.parallel_env()" in message
    )
    assert "entry_point" not in message


def test_make_vec_of_tag_still_gives_the_vector_env():
    env = gym.make_vec("gpu_envs/Tag-v0", num_envs=2, **SMALL)
    assert isinstance(env, TagGymVectorEnv) and env.num_envs == 2 * 5


# ----------------------------------------------------------------- docs/using-with.md
USING_WITH = Path(__file__).resolve().parents[2] / "docs" / "using-with.md"


def snippets() -> dict[str, str]:
    """The ```python blocks of docs/using-with.md, by the title of their section."""
    text = USING_WITH.read_text()
    blocks = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0].strip()
        for i, code in enumerate(re.findall(r"^```python\n(.*?)^```", section, flags=re.M | re.S)):
            blocks[f"{title} #{i}"] = code
    return blocks


def test_every_library_has_a_snippet():
    titles = {name.rsplit(" #", 1)[0] for name in snippets()}
    assert titles == {
        "gymnasium wrappers",
        "stable-baselines3",
        "TorchRL",
        "A CleanRL-style loop",
        "Lightning",
        "PettingZoo",
    }


@pytest.mark.parametrize("name", sorted(snippets()))
def test_snippet_runs(name):
    exec(
        compile(snippets()[name], f"{USING_WITH.name}: {name}", "exec"), {"__name__": "__snippet__"}
    )


def test_wrapper_matrix_lists_every_gymnasium_vector_wrapper():
    import gymnasium.wrappers.vector as vector_wrappers

    table = [line for line in USING_WITH.read_text().splitlines() if line.startswith("| `")]
    named = {name for line in table for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    assert named == set(vector_wrappers.__all__)
