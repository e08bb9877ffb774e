"""gymnasium's vector wrappers on gpu_envs/CartPole-v1 (directly on torch tensors, or on the NumPy
face ``array="numpy"``), and the torch-native normalizers against gymnasium's on the same data."""

import builtins
import re
from pathlib import Path

import gymnasium as gym
import gymnasium.wrappers.vector as V
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.utils import RunningMeanStd as GymRunningMeanStd
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_envs  # noqa: F401  (registers the ids)
from gpu_envs.adapters.wrappers import (
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    RunningMeanStd,
)

USING_WITH = Path(__file__).resolve().parents[2] / "docs" / "using-with.md"

NUM_ENVS = 4


def double(x):
    return 2 * x


# Wrappers that take our torch tensors as they are (and give tensors back).
DIRECT = {
    "ClipReward": lambda env: V.ClipReward(env, -0.5, 0.5),
    "TransformReward": lambda env: V.TransformReward(env, double),
    "VectorizeTransformReward": lambda env: V.VectorizeTransformReward(
        env, gym.wrappers.TransformReward, func=double
    ),
    "TransformObservation": lambda env: V.TransformObservation(env, double),
    "TransformAction": lambda env: V.TransformAction(env, lambda a: 1 - a),
    "DictInfoToList": V.DictInfoToList,
}
# Wrappers written for NumPy: they run on the NumPy face, gym.make_vec(..., array="numpy").
CONVERTED = {
    "RecordEpisodeStatistics": V.RecordEpisodeStatistics,
    "NormalizeObservation": V.NormalizeObservation,
    "NormalizeReward": V.NormalizeReward,
    "VectorizeTransformObservation": lambda env: V.VectorizeTransformObservation(
        env,
        gym.wrappers.TransformObservation,
        func=double,
        observation_space=env.single_observation_space,
    ),
    "VectorizeTransformAction": lambda env: V.VectorizeTransformAction(
        env,
        gym.wrappers.TransformAction,
        func=lambda a: 1 - a,
        action_space=env.single_action_space,
    ),
    "DtypeObservation": lambda env: V.DtypeObservation(env, np.float64),
    "ReshapeObservation": lambda env: V.ReshapeObservation(env, (2, 2)),
    "FlattenObservation": V.FlattenObservation,
}
# Wrappers that need gymnasium[other] (moviepy, opencv); they run on the NumPy face.
OPTIONAL = {
    "RecordVideo": (
        "moviepy",
        lambda env, tmp_path: V.RecordVideo(env, str(tmp_path), episode_trigger=lambda i: i == 0),
    ),
    "HumanRendering": ("cv2", lambda env, tmp_path: V.HumanRendering(env)),
}
# Wrappers that need Box actions or finite observation bounds (not CartPole's): they run on the
# NumPy face of the games that have them, which docs/using-with.md's table names.
BOUNDED = {
    "ClipAction": V.ClipAction,
    "RescaleAction": lambda env: V.RescaleAction(env, -1.0, 1.0),
    "RescaleObservation": lambda env: V.RescaleObservation(env, -1.0, 1.0),
}
NOT_APPLICABLE = {
    "FilterObservation": "needs a Dict observation space",
    "GrayscaleObservation": "needs image observations",
    "ResizeObservation": "needs image observations",
    "ArrayConversion": "a conversion wrapper: the NumPy face (array='numpy') is one",
    "JaxToNumpy": "converts from JAX envs",
    "JaxToTorch": "converts from JAX envs",
    "NumpyToTorch": "converts from NumPy envs (ours already return torch)",
}


def make_env(**kwargs):
    return gym.make_vec("gpu_envs/CartPole-v1", num_envs=NUM_ENVS, device="cpu", **kwargs)


def run(env, steps: int, to_action):
    env.action_space.seed(0)
    outputs = [env.reset(seed=0)]
    for _ in range(steps):
        outputs.append(env.step(to_action(env.action_space.sample())))
    return outputs


def test_every_vector_wrapper_of_gymnasium_is_classified():
    classified = set(DIRECT) | set(CONVERTED) | set(OPTIONAL) | set(BOUNDED) | set(NOT_APPLICABLE)
    assert classified == set(V.__all__)


@pytest.mark.parametrize("name", sorted(DIRECT))
def test_wrapper_steps_directly_on_torch_tensors(name):
    env = DIRECT[name](make_env())
    last = run(env, 30, torch.as_tensor)[-1]
    obs, rewards, terminated, truncated, _ = last
    assert all(isinstance(x, torch.Tensor) for x in (obs, rewards, terminated, truncated))
    assert obs.shape == (NUM_ENVS, 4) and rewards.shape == (NUM_ENVS,)


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_wrapper_steps_on_the_numpy_face(name):
    env = CONVERTED[name](make_env(array="numpy"))
    obs, rewards, terminated, truncated, _ = run(env, 30, lambda a: a)[-1]
    assert isinstance(obs, np.ndarray) and isinstance(rewards, np.ndarray)
    assert obs.shape[0] == NUM_ENVS and terminated.shape == truncated.shape == (NUM_ENVS,)
    assert env.observation_space.contains(obs.astype(env.observation_space.dtype))


@pytest.mark.parametrize("name", sorted(OPTIONAL))
def test_optional_wrapper_steps_on_the_numpy_face(name, tmp_path, monkeypatch):
    module, factory = OPTIONAL[name]
    pytest.importorskip(module)
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    env = factory(make_env(render_mode="rgb_array", array="numpy"), tmp_path)
    obs = run(env, 10, lambda a: a)[-1][0]
    assert obs.shape == (NUM_ENVS, 4)
    env.close()


def test_numpy_wrappers_fail_directly_on_torch_tensors():
    """Why they are in CONVERTED: gymnasium's NumPy code does not take torch tensors."""
    env = V.NormalizeObservation(make_env())
    with pytest.raises(TypeError):
        env.reset(seed=0)


def table_row(*names: str) -> str:
    """The row of docs/using-with.md's tables whose first cell names exactly ``names``."""
    (row,) = [
        line
        for line in USING_WITH.read_text("utf8").splitlines()
        if line.startswith("| `")
        and re.findall(r"`(\w+)`", line.split("|")[1]) == list(names)
        and "Error" not in line
    ]
    return row


@pytest.mark.parametrize("names", [("ClipAction", "RescaleAction"), ("RescaleObservation",)])
def test_bounded_wrappers_row_names_every_game_they_fit(names):
    """docs/using-with.md names, in the NumPy face's column, exactly the games (by id) whose NumPy
    face each wrapper runs on; the torch face's column sends the reader to array='numpy'."""
    from gpu_envs.games import GAMES

    row = table_row(*names)
    torch_cell, numpy_cell = row.split("|")[2:4]
    assert 'array="numpy"' in torch_cell
    for name in names:
        for game in GAMES.values():
            named = game.env_id.split("/", 1)[1] in numpy_cell
            kwargs = dict(num_taggers=1, num_runners=2) if game.name == "tag" else {}
            env = gym.make_vec(game.env_id, num_envs=2, array="numpy", **kwargs)
            try:
                wrapped = BOUNDED[name](env)
                wrapped.reset(seed=0)
                wrapped.step(wrapped.action_space.sample())
                fits = True
            except (TypeError, ValueError):
                fits = False
            assert fits == named, f"{name} on {game.env_id}: runs {fits}, named {named}"


def test_the_torch_face_errors_of_numpy_wrappers_are_those_the_page_lists():
    """docs/using-with.md quotes the error each NumPy wrapper raises on the torch face, so that
    a reader who meets it finds the fix (array='numpy'): each quoted wrapper raises it."""
    rows = [
        line
        for line in USING_WITH.read_text("utf8").splitlines()
        if line.startswith("| `") and "Error" in line
    ]
    assert len(rows) >= 5
    for row in rows:
        names_cell, error_cell = row.split("|")[1:3]
        kind, _, message = error_cell.strip().strip("`").strip().partition(": ")
        for name in re.findall(r"`(\w+)`", names_cell):
            factory = {**CONVERTED, **BOUNDED}[name]
            game = "Pendulum-v1" if name in BOUNDED else "CartPole-v1"  # bounds / CartPole's shape
            env = factory(gym.make_vec(f"gpu_envs/{game}", num_envs=NUM_ENVS))
            with pytest.raises(getattr(builtins, kind), match=re.escape(message)):
                run(env, 3, torch.as_tensor)


@pytest.mark.parametrize(
    "wrapper", [RecordEpisodeStatistics, NormalizeObservation, NormalizeReward]
)
def test_our_wrappers_refuse_the_numpy_face_naming_gymnasiums(wrapper):
    name = wrapper.__name__
    for env in (make_env(array="numpy"), V.ClipReward(make_env(array="numpy"), 0.0, 0.5)):
        with pytest.raises(TypeError, match=rf"array='numpy'.*gymnasium.wrappers.vector.{name}"):
            wrapper(env)


# ----------------------------------------------------------------- torch-native normalizers


def paired_runs(ours, theirs, steps: int = 150, **env_kwargs):
    """The same actions through our wrapper (torch) and gymnasium's (on the NumPy face)."""
    mine = ours(make_env(**env_kwargs))
    reference = theirs(make_env(array="numpy", **env_kwargs))
    actions = np.random.default_rng(0).integers(0, 2, (steps, NUM_ENVS))
    got = [mine.reset(seed=0)] + [mine.step(torch.as_tensor(a)) for a in actions]
    want = [reference.reset(seed=0)] + [reference.step(a) for a in actions]
    return mine, reference, got, want


def test_normalize_observation_matches_gymnasium():
    mine, reference, got, want = paired_runs(NormalizeObservation, V.NormalizeObservation)
    for g, w in zip(got, want):
        assert g[0].dtype == torch.float32
        np.testing.assert_allclose(g[0].numpy(), w[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        mine.obs_rms.mean.numpy(), reference.obs_rms.mean, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(mine.obs_rms.var.numpy(), reference.obs_rms.var, rtol=1e-5)
    assert float(mine.obs_rms.count) == pytest.approx(reference.obs_rms.count)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_normalize_reward_matches_gymnasium(mode):
    mine, reference, got, want = paired_runs(
        NormalizeReward, V.NormalizeReward, autoreset_mode=mode
    )
    assert any(bool(g[2].any()) for g in got[1:]), "the run must contain episode ends"
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g[1].numpy(), w[1], rtol=1e-5)
    np.testing.assert_allclose(float(mine.return_rms.var), reference.return_rms.var, rtol=1e-5)
    assert float(mine.return_rms.count) == pytest.approx(reference.return_rms.count)


def test_frozen_statistics_stay_put():
    env = NormalizeReward(NormalizeObservation(make_env()))
    env.reset(seed=0)
    env.update_running_mean = False
    env.env.update_running_mean = False
    before = (env.return_rms.var.clone(), env.env.obs_rms.mean.clone())
    for _ in range(5):
        env.step(torch.ones(NUM_ENVS, dtype=torch.int64))
    assert torch.equal(env.return_rms.var, before[0]) and torch.equal(
        env.env.obs_rms.mean, before[1]
    )


def test_partial_reset_takes_in_only_the_reset_rows():
    env = NormalizeObservation(make_env(autoreset_mode="disabled"))
    env.reset(seed=0)
    count = float(env.obs_rms.count)
    env.reset(options={"reset_mask": torch.tensor([True, False, False, True])})
    assert float(env.obs_rms.count) == pytest.approx(count + 2)


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="epsilon"):
        NormalizeObservation(make_env(), epsilon=0.0)
    with pytest.raises(ValueError, match="gamma"):
        NormalizeReward(make_env(), gamma=1.5)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.floats(-1e3, 1e3), st.booleans()), min_size=1, max_size=6),
        min_size=1,
        max_size=5,
    )
)
def test_running_mean_std_matches_gymnasium_on_masked_batches(batches):
    mine, reference = RunningMeanStd((), torch.device("cpu")), GymRunningMeanStd(shape=())
    for batch in batches:
        values = np.array([v for v, _ in batch])
        mask = np.array([m for _, m in batch])
        mine.update(torch.as_tensor(values), torch.as_tensor(mask))
        if mask.any():
            reference.update(values[mask])
    np.testing.assert_allclose(float(mine.mean), reference.mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(float(mine.var), reference.var, rtol=1e-7, atol=1e-6)
    assert float(mine.count) == pytest.approx(reference.count)
