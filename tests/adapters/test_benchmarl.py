"""Tag for BenchMARL (docs/using-with-marl.md): the TorchRL env the task wraps (groups "tagger" and
"runner", one categorical action per agent that splits into Tag's index pair) with gpu-envs' own
torchrl, and, where BenchMARL is importable (it needs torchrl < 0.12), MAPPO and IPPO running a few
iterations on ``TagTask``."""

import pytest
import torch
from torchrl.data import Categorical

from gpu_envs.adapters.torchrl import TagTorchRLEnv
from gpu_envs.adapters.torchrl_joint_actions import joint_action_tag_env
from tests.helpers.marl_docs import run_block, section_blocks

SECTION = "BenchMARL"
#: Acceleration and turn choices of different counts, so a swapped split would show.
PARAMS = dict(
    num_taggers=2, num_runners=3, episode_length=10, num_acceleration_levels=3, num_turn_levels=5
)


@pytest.fixture
def one_torch_thread():
    """Tiny networks: more threads only contend on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def docs_block(needs: str) -> tuple[str, str | None]:
    """The section's block that imports ``needs``."""
    (block,) = [b for b in section_blocks(SECTION) if f"from {needs}" in b[0]]
    return block


def test_docs_torchrl_env_block_prints_what_the_page_says():
    code, expected = docs_block("gpu_envs.adapters.torchrl_joint_actions")
    assert run_block(code, {"__name__": "__docs__"}, f"{SECTION}: TorchRL env") == expected


def test_joint_actions_are_categorical_and_split_into_the_index_pairs():
    joint = joint_action_tag_env(4, seed=3, **PARAMS)
    pairs = TagTorchRLEnv(4, categorical_action_encoding=True, **PARAMS)
    pairs.set_seed(3)
    nvec = pairs.batched_env.action_nvec
    assert nvec == (4, 6)
    for team, size in (("tagger", 2), ("runner", 3)):
        spec = joint.full_action_spec[team, "action"]
        assert isinstance(spec, Categorical) and spec.space.n == 24
        assert spec.shape == (4, size) and spec.dtype == torch.int64
    td_joint, td_pairs = joint.reset(), pairs.reset()
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        for team, size in (("tagger", 2), ("runner", 3)):
            k = torch.randint(0, 24, (4, size), generator=generator)
            td_joint[team, "action"] = k
            td_pairs[team, "action"] = torch.stack((k // 6, k % 6), dim=-1)
        out_joint, td_joint = joint.step_and_maybe_reset(td_joint)
        out_pairs, td_pairs = pairs.step_and_maybe_reset(td_pairs)
        for key in ("observation", "reward", "active"):
            for team in ("tagger", "runner"):
                torch.testing.assert_close(
                    out_joint["next", team, key], out_pairs["next", team, key], rtol=0, atol=0
                )
        torch.testing.assert_close(out_joint["next", "done"], out_pairs["next", "done"])


def benchmarl_or_skip() -> None:
    try:
        import benchmarl  # noqa: F401
    except ImportError as error:
        pytest.skip(f"BenchMARL is not importable here ({error}); see docs/using-with-marl.md")


@pytest.fixture(scope="module")
def docs_benchmarl_run() -> tuple[dict, str, str | None]:
    """The page's BenchMARL block (MAPPO): its namespace, what it printed and what the page says."""
    benchmarl_or_skip()
    code, expected = docs_block("benchmarl.experiment")
    namespace = {"__name__": "__docs__"}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        printed = run_block(code, namespace, f"{SECTION}: MAPPO")
    finally:
        torch.set_num_threads(threads)
    return namespace, printed, expected


def test_docs_mappo_block_runs_two_iterations(docs_benchmarl_run):
    namespace, printed, expected = docs_benchmarl_run
    assert printed == expected
    experiment = namespace["experiment"]
    assert experiment.group_map == {
        "tagger": ["tagger_0", "tagger_1"],
        "runner": [f"runner_{i}" for i in range(4)],
    }
    for team, size in (("tagger", 2), ("runner", 4)):
        assert experiment.action_spec[team, "action"].space.n == 11 * 11
        assert set(experiment.observation_spec[team].keys()) == {"observation"}
        assert experiment.observation_spec[team, "observation"].shape == (size, 7 * 5 + 1)


def test_ippo_runs_on_the_same_task(docs_benchmarl_run, one_torch_thread):
    from benchmarl.algorithms import IppoConfig
    from benchmarl.experiment import Experiment
    from benchmarl.models.mlp import MlpConfig

    namespace, _, _ = docs_benchmarl_run
    experiment = Experiment(
        task=namespace["task"],
        algorithm_config=IppoConfig.get_from_yaml(),
        model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(),
        seed=1,
        config=namespace["config"],
    )
    experiment.run()
    assert (experiment.n_iters_performed, experiment.total_frames) == (2, 320)
