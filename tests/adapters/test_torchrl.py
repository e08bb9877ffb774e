"""TorchRL envs: check_env_specs, partial resets through "_reset", the transitions TorchRL collects
compared with our SAME_STEP vector envs stepping the same actions from the same seeds, and the
generic KernelTorchRLEnv's checks (seed, envs it refuses, Box actions)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("torchrl")

from gymnasium.vector import AutoresetMode
from tensordict import TensorDict
from torchrl.envs.utils import MarlGroupMapType, check_env_specs

from gpu_envs.adapters.torchrl import CartPoleTorchRLEnv, KernelTorchRLEnv, TagTorchRLEnv
from gpu_envs.adapters.torchrl_joint_actions import joint_action_tag_env
from gpu_envs.engine.kernel_env import KernelEnv
from gpu_envs.games.cartpole import CartPoleVectorEnv
from gpu_envs.games.pendulum import PendulumVectorEnv
from gpu_envs.games.tag.env import TagEnv
from tests.helpers import host_reads

count_host_reads = host_reads.count_host_reads  # the fixture

TAG_PARAMS = dict(num_taggers=2, num_runners=3, episode_length=6, tagging_distance=0.2)
INDEX = dict(
    categorical_action_encoding=True
)  # actions as indices (the default is one-hot, as GymEnv)


def _collect(env, actions_per_step, seed: int) -> list[tuple[TensorDict, TensorDict]]:
    """(transition, next root) pairs from TorchRL's ``step_and_maybe_reset`` loop, which resets
    the finished envs through the ``"_reset"`` mask."""
    env.set_seed(seed)
    root = env.reset()
    pairs = []
    for actions in actions_per_step:
        root.update(actions)
        transition, root = env.step_and_maybe_reset(root)
        pairs.append((transition.clone(), root.clone()))
    return pairs


# ------------------------------------------------------------------------------------- CartPole
def test_cartpole_passes_check_env_specs():
    env = CartPoleTorchRLEnv(4, max_episode_steps=12, **INDEX)
    check_env_specs(env, seed=0, break_when_any_done="both")
    assert env.batch_size == torch.Size([4]) and env.device == torch.device("cpu")


def test_cartpole_transitions_and_partial_resets_match_same_step_vector_env():
    n, horizon, steps, seed = 5, 25, 120, 3
    rng = np.random.default_rng(1)
    actions = [torch.from_numpy(rng.integers(0, 2, n)) for _ in range(steps)]
    pairs = _collect(
        CartPoleTorchRLEnv(n, max_episode_steps=horizon, **INDEX),
        [TensorDict({"action": a}, batch_size=[n]) for a in actions],
        seed,
    )

    reference = CartPoleVectorEnv(
        n, autoreset_mode=AutoresetMode.SAME_STEP, max_episode_steps=horizon
    )
    reference.reset(seed=seed)
    partial_resets = 0
    for a, (transition, root) in zip(actions, pairs):
        obs, rewards, terminated, truncated, info = reference.step(a)
        done = terminated | truncated
        assert torch.equal(transition["next", "reward"].squeeze(-1), rewards)
        assert torch.equal(transition["next", "terminated"].squeeze(-1), terminated)
        assert torch.equal(transition["next", "truncated"].squeeze(-1), truncated)
        assert torch.equal(transition["next", "done"].squeeze(-1), done)
        final = torch.where(info["_final_obs"][:, None], info["final_obs"], obs)
        assert torch.equal(transition["next", "observation"], final)
        assert torch.equal(root["observation"], obs)  # finished envs were reset, the others kept
        assert not root["done"].any()
        partial_resets += int(0 < done.sum() < n)
    assert partial_resets >= 5


def test_cartpole_reset_mask_resets_only_the_masked_envs():
    env = CartPoleTorchRLEnv(3, **INDEX)
    td = env.reset()
    for _ in range(4):
        td = env.rand_step(td)["next"].exclude("reward")
    before = td["observation"].clone()
    td["_reset"] = torch.tensor([[False], [True], [False]])
    after = env.reset(td)
    assert torch.equal(after["observation"][[0, 2]], before[[0, 2]])
    assert not torch.equal(after["observation"][1], before[1])
    assert after["observation"][1].abs().max() <= 0.05  # a start state
    assert env.batched_env._tensors.elapsed.tolist() == [4, 0, 4]


def test_cartpole_device_is_fixed_and_bad_actions_raise():
    env = CartPoleTorchRLEnv(2, **INDEX)
    assert env.to("cpu") is env
    with pytest.raises(ValueError, match="lives on cpu"):
        env.to("cuda")
    td = env.reset()
    td["action"] = torch.tensor([0, 2])
    with pytest.raises(ValueError, match="out of range"):
        env.step(td)


# ------------------------------------------------------------------------------------- Tag
def test_tag_passes_check_env_specs_with_groups_after_the_batch_dimension():
    env = TagTorchRLEnv(3, **TAG_PARAMS, **INDEX)
    check_env_specs(env, seed=0, break_when_any_done="both")
    obs_dim = env.batched_env.obs_dim
    assert env.group_map == {
        "tagger": ["tagger_0", "tagger_1"],
        "runner": ["runner_0", "runner_1", "runner_2"],
    }
    assert env.observation_spec["runner", "observation"].shape == (3, 3, obs_dim)
    assert env.action_spec["tagger", "action"].shape == (3, 2, 2)
    assert env.reward_spec["runner", "reward"].shape == (3, 3, 1)
    assert env.full_done_spec["done"].shape == (3, 1)


def test_tag_transitions_and_partial_resets_match_same_step_tag_env():
    games, steps, seed = 3, 20, 5
    env = TagTorchRLEnv(games, **TAG_PARAMS, **INDEX)
    nvec = torch.tensor(env.batched_env.action_nvec)
    gen = torch.Generator().manual_seed(0)
    actions = [(torch.rand(games, 5, 2, generator=gen) * nvec).long() for _ in range(steps)]
    per_group = [
        TensorDict(
            {("tagger", "action"): a[:, :2], ("runner", "action"): a[:, 2:]}, batch_size=[games]
        )
        for a in actions
    ]

    # Stagger the games: one step, then reset game 1 alone, so the games end at different steps.
    env.set_seed(seed)
    root = env.reset()
    root.update(per_group[0])
    root = env.step_and_maybe_reset(root)[1]
    root["_reset"] = torch.tensor([[False], [True], [False]])
    root = env.reset(root)
    assert env.batched_env.state["t"].tolist() == [1, 0, 1]
    pairs = []
    for group_actions in per_group[1:]:
        root.update(group_actions)
        transition, root = env.step_and_maybe_reset(root)
        pairs.append((transition.clone(), root.clone()))

    reference = TagEnv(games, autoreset_mode=AutoresetMode.SAME_STEP, **TAG_PARAMS)
    reference.reset(seed=seed)
    reference.step(actions[0])
    reference.reset(options={"reset_mask": torch.tensor([False, True, False])})
    partial_resets = 0
    for a, (transition, root) in zip(actions[1:], pairs):
        obs, rewards, terminated, truncated, info = reference.step(a)
        final = torch.where(info["_final_obs"][:, None, None], info["final_obs"], obs)
        final_active = torch.where(
            info["_final_obs"][:, None], info["final_active"], info["active"]
        )
        assert torch.equal(transition["next", "done"].squeeze(-1), terminated | truncated)
        assert torch.equal(transition["next", "terminated"].squeeze(-1), terminated)
        for group, agents in (("tagger", slice(0, 2)), ("runner", slice(2, 5))):
            assert torch.equal(transition["next", group, "observation"], final[:, agents])
            assert torch.equal(transition["next", group, "reward"].squeeze(-1), rewards[:, agents])
            assert torch.equal(transition["next", group, "active"], final_active[:, agents])
            assert torch.equal(root[group, "observation"], obs[:, agents])
            assert torch.equal(root[group, "active"], info["active"][:, agents])
        partial_resets += int(0 < terminated.sum() < games)
    assert partial_resets >= 2


# ------------------------------------------------------------------------------------- group_map
def _group_rollouts(group_map, steps: int = 12) -> tuple[TagTorchRLEnv, TensorDict]:
    """A rollout of Tag with ``group_map`` and index actions drawn per agent from one generator
    (the same actions for every group map)."""
    env = TagTorchRLEnv(2, **TAG_PARAMS, **INDEX, group_map=group_map)
    names = env.batched_env.agent_names
    nvec = torch.tensor(env.batched_env.action_nvec)
    gen = torch.Generator().manual_seed(0)
    actions = [(torch.rand(2, 5, 2, generator=gen) * nvec).long() for _ in range(steps)]
    env.set_seed(4)
    root, transitions = env.reset(), []
    for a in actions:
        for group, agents in env.group_map.items():
            root[group, "action"] = a[:, [names.index(agent) for agent in agents]]
        transition, root = env.step_and_maybe_reset(root)
        transitions.append(transition.clone())
    return env, torch.stack(transitions, dim=1)


def _per_agent(env: TagTorchRLEnv, rollout: TensorDict, key) -> dict[str, torch.Tensor]:
    """Each agent's ``key`` entries of the rollout, by agent name."""
    return {
        agent: rollout[("next", group, key)][:, :, i]
        for group, agents in env.group_map.items()
        for i, agent in enumerate(agents)
    }


@pytest.mark.parametrize(
    "group_map",
    [
        MarlGroupMapType.ALL_IN_ONE_GROUP,
        MarlGroupMapType.ONE_GROUP_PER_AGENT,
        {"mixed": ["runner_2", "tagger_0"], "rest": ["runner_0", "tagger_1", "runner_1"]},
    ],
    ids=["all_in_one", "one_per_agent", "dict"],
)
def test_group_maps_regroup_the_same_agents(group_map):
    default_env, default = _group_rollouts(None)
    env, grouped = _group_rollouts(group_map)
    check_env_specs(env, seed=0)
    for key in ("observation", "reward", "active"):
        want, got = _per_agent(default_env, default, key), _per_agent(env, grouped, key)
        assert set(got) == set(want)
        assert all(torch.equal(got[agent], want[agent]) for agent in want)
    assert torch.equal(grouped["next", "done"], default["next", "done"])


def test_all_in_one_group_has_single_reward_and_action_keys():
    env = TagTorchRLEnv(3, **TAG_PARAMS, group_map=MarlGroupMapType.ALL_IN_ONE_GROUP)
    assert env.group_map == {
        "agents": [*(f"tagger_{i}" for i in range(2)), "runner_0", "runner_1", "runner_2"]
    }
    assert env.reward_key == ("agents", "reward") and env.action_key == ("agents", "action")
    assert env.n_agents == 5
    assert env.observation_spec["agents", "observation"].shape == (3, 5, env.batched_env.obs_dim)
    with pytest.raises(KeyError, match="more than one key"):  # the teams: two reward keys
        _ = TagTorchRLEnv(3, **TAG_PARAMS).reward_key


class EngineEnvs:
    """The engine envs built while a test runs, and how often each was closed."""

    def __init__(self) -> None:
        self.made: list[KernelEnv] = []
        self.closed_ids: list[int] = []

    def closes(self) -> list[int]:
        """How many times each env built was closed (others, collected meanwhile, not counted)."""
        return [self.closed_ids.count(id(env)) for env in self.made]


@pytest.fixture
def engine_envs(monkeypatch) -> EngineEnvs:
    """Records the engine envs built and closed while the test runs."""
    envs = EngineEnvs()
    init, close = KernelEnv.__init__, KernelEnv.close

    def recorded_init(self, *args, **kwargs):
        envs.made.append(self)
        init(self, *args, **kwargs)

    def recorded_close(self, **kwargs):
        envs.closed_ids.append(id(self))
        close(self, **kwargs)

    monkeypatch.setattr(KernelEnv, "__init__", recorded_init)
    monkeypatch.setattr(KernelEnv, "close", recorded_close)
    return envs


@pytest.mark.parametrize(
    "make",
    [
        lambda: CartPoleTorchRLEnv(2),
        lambda: KernelTorchRLEnv(PendulumVectorEnv(2, autoreset_mode="disabled")),
        lambda: TagTorchRLEnv(2, **TAG_PARAMS),
        lambda: joint_action_tag_env(2, **TAG_PARAMS),
    ],
    ids=["cartpole", "kernel", "tag", "joint_actions"],
)
def test_close_closes_the_engine_env(make, engine_envs):
    env = make()
    env.rollout(3)
    env.close()
    assert engine_envs.closes() == [1]
    with pytest.raises(RuntimeError, match="is closed"):
        engine_envs.made[0].reset()


@pytest.mark.parametrize(
    "group_map, match",
    [
        ({"a": ["tagger_0", "tagger_1"]}, "runner_0 wasn't found in any group"),
        (
            {"a": ["tagger_0", "tagger_0"], "b": ["tagger_1", "runner_0", "runner_1", "runner_2"]},
            "present more than once",
        ),
        ({"a": ["tagger_9"]}, "tagger_9 wasn't present"),
        ({"done": ["tagger_0", "tagger_1", "runner_0", "runner_1", "runner_2"]}, "root keys"),
        ({1: ["tagger_0"]}, "group_map must be"),
        ("agents", "group_map must be"),
    ],
)
def test_bad_group_maps_are_refused_naming_the_problem(group_map, match, engine_envs):
    with pytest.raises((ValueError, TypeError), match=match):
        TagTorchRLEnv(1, **TAG_PARAMS, group_map=group_map)
    assert engine_envs.closes() == [1]  # the Tag env it built


def test_a_refused_seed_closes_the_env_built_for_it(engine_envs):
    with pytest.raises(ValueError, match="seed must be"):
        joint_action_tag_env(2, seed=-1, **TAG_PARAMS)
    assert engine_envs.closes() == [1]


class _TwoHeads(torch.distributions.Distribution):
    """Tag's action as TorchRL's tutorial policy samples it: independent categorical heads over
    the blocks ``nvec`` of the logits, an (acceleration index, turn index) pair."""

    arg_constraints: dict = {}

    def __init__(self, logits: torch.Tensor, nvec):
        self.heads = [
            torch.distributions.Categorical(logits=block) for block in logits.split(list(nvec), -1)
        ]
        super().__init__(batch_shape=logits.shape[:-1], validate_args=False)

    def sample(self, sample_shape=()):
        return torch.stack([head.sample(sample_shape) for head in self.heads], -1)

    def log_prob(self, value):
        return sum(head.log_prob(value[..., i]) for i, head in enumerate(self.heads))

    def entropy(self):
        return sum(head.entropy() for head in self.heads)

    @property
    def deterministic_sample(self):
        return torch.stack([head.probs.argmax(-1) for head in self.heads], -1)


def test_torchrl_multi_agent_ppo_tutorial_runs_on_tag_as_one_group():
    """The core of TorchRL's multi-agent PPO tutorial (its VMAS env swapped for Tag with
    ``group_map=ALL_IN_ONE_GROUP``, a categorical policy for Tag's discrete actions, small sizes):
    RewardSum on ``env.reward_key``, MultiAgentMLP policy and centralised critic, a collector,
    ClipPPOLoss with the reward key set, GAE and two updates."""
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.data.replay_buffers import ReplayBuffer
    from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
    from torchrl.data.replay_buffers.storages import LazyTensorStorage
    from torchrl.envs import RewardSum, TransformedEnv
    from torchrl.modules import MultiAgentMLP, ProbabilisticActor
    from torchrl.objectives import ClipPPOLoss, ValueEstimators

    torch.manual_seed(0)
    tag = TagTorchRLEnv(4, **TAG_PARAMS, **INDEX, group_map=MarlGroupMapType.ALL_IN_ONE_GROUP)
    env = TransformedEnv(
        tag, RewardSum(in_keys=[tag.reward_key], out_keys=[("agents", "episode_reward")])
    )
    check_env_specs(env)
    obs_dim = env.observation_spec["agents", "observation"].shape[-1]
    nvec = tag.batched_env.action_nvec
    mlp = dict(n_agents=env.n_agents, depth=2, num_cells=32, activation_class=torch.nn.Tanh)
    policy = ProbabilisticActor(
        module=TensorDictModule(
            MultiAgentMLP(obs_dim, sum(nvec), centralised=False, share_params=True, **mlp),
            in_keys=[("agents", "observation")],
            out_keys=[("agents", "logits")],
        ),
        spec=env.full_action_spec_unbatched,
        in_keys={"logits": ("agents", "logits")},
        out_keys=[env.action_key],
        distribution_class=_TwoHeads,
        distribution_kwargs={"nvec": nvec},
        return_log_prob=True,
        log_prob_key=("agents", "sample_log_prob"),
    )
    critic = TensorDictModule(
        MultiAgentMLP(obs_dim, 1, centralised=True, share_params=True, **mlp),
        in_keys=[("agents", "observation")],
        out_keys=[("agents", "state_value")],
    )
    frames_per_batch, minibatch_size = 64, 16
    collector = Collector(
        env, policy, frames_per_batch=frames_per_batch, total_frames=2 * frames_per_batch
    )
    replay_buffer = ReplayBuffer(
        storage=LazyTensorStorage(frames_per_batch),
        sampler=SamplerWithoutReplacement(),
        batch_size=minibatch_size,
    )
    loss_module = ClipPPOLoss(
        actor=policy,
        critic=critic,
        clip_epsilon=0.2,
        entropy_coeff=1e-4,
        normalize_advantage=False,
    )
    loss_module.set_keys(
        reward=env.reward_key,
        action=env.action_key,
        sample_log_prob=("agents", "sample_log_prob"),
        value=("agents", "state_value"),
    )
    loss_module.make_value_estimator(ValueEstimators.GAE, gamma=0.99, lmbda=0.9)
    optim = torch.optim.Adam(loss_module.parameters(), 3e-4)
    before = [p.detach().clone() for p in loss_module.parameters()]
    iterations = 0
    for data in collector:
        for key in ("done", "terminated"):  # the shared flags, expanded to the agents' rewards
            data.set(
                ("next", key),
                data.get(("next", key))
                .unsqueeze(-1)
                .expand(data.get(("next", env.reward_key)).shape),
            )
        with torch.no_grad():
            loss_module.value_estimator(
                data,
                params=loss_module.critic_network_params,
                target_params=loss_module.target_critic_network_params,
            )
        replay_buffer.extend(data.reshape(-1))
        for _ in range(frames_per_batch // minibatch_size):
            losses = loss_module(replay_buffer.sample())
            loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
            assert torch.isfinite(loss)
            loss.backward()
            optim.step()
            optim.zero_grad()
        collector.update_policy_weights_()
        assert data["next", "agents", "episode_reward"].shape == (4, 16, 5, 1)
        iterations += 1
    assert iterations == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, loss_module.parameters()))


# ------------------------------------------------------------------------------------- action
# encodings
def test_default_encoding_is_one_hot_like_gymenv():
    from torchrl.data import MultiOneHot, OneHot
    from torchrl.envs import GymEnv

    assert isinstance(GymEnv("CartPole-v1").action_spec, OneHot)  # the convention we follow
    cartpole, tag = CartPoleTorchRLEnv(4), TagTorchRLEnv(3, **TAG_PARAMS)
    assert isinstance(cartpole.action_spec, OneHot) and cartpole.action_spec.shape == (4, 2)
    spec = tag.action_spec["tagger", "action"]
    assert isinstance(spec, MultiOneHot) and spec.shape == (3, 2, sum(tag.batched_env.action_nvec))


@pytest.mark.parametrize(
    "make",
    [lambda: CartPoleTorchRLEnv(4, max_episode_steps=12), lambda: TagTorchRLEnv(3, **TAG_PARAMS)],
    ids=["cartpole", "tag"],
)
def test_one_hot_envs_pass_check_env_specs_and_roll_out(make):
    env = make()
    check_env_specs(env, seed=0, break_when_any_done="both")
    rollout = env.rollout(20, break_when_any_done=False)
    assert rollout.batch_size == (env.batch_size[0], 20)
    assert env.full_action_spec.is_in(rollout[:, -1].select(*env.action_keys))


def test_one_hot_and_index_actions_give_the_same_transitions():
    games, steps = 3, 12
    one_hot, index = TagTorchRLEnv(games, **TAG_PARAMS), TagTorchRLEnv(games, **TAG_PARAMS, **INDEX)
    roots = []
    for env in (one_hot, index):
        env.set_seed(7)
        roots.append(env.reset())
    for _ in range(steps):
        one_hot_actions = one_hot.full_action_spec.rand()
        roots[0].update(one_hot_actions)
        for team in ("tagger", "runner"):
            spec = one_hot.action_spec[team, "action"]
            roots[1][team, "action"] = spec.to_categorical(one_hot_actions[team, "action"])
        transitions = []
        for i, env in enumerate((one_hot, index)):
            transition, roots[i] = env.step_and_maybe_reset(roots[i])
            transitions.append(transition["next"])
        assert (transitions[0] == transitions[1]).all()


# ------------------------------------------------------------------------------------- any engine
# env
@pytest.mark.parametrize("seed", [-1, True, "7", 1.5, 2**63 - 1])
def test_set_seed_checks_the_seed_before_torchrl_uses_it(seed):
    env = CartPoleTorchRLEnv(2)
    with pytest.raises(ValueError, match="seed must be an int"):
        env.set_seed(seed)
    env.set_seed(2**63 - 2)  # the largest seed whose env seeds (s, s + 1) fit in int64
    assert env.reset()["observation"].shape == (2, 4)


def test_kernel_torchrl_env_refuses_envs_it_cannot_drive():
    with pytest.raises(ValueError, match="autoreset_mode='disabled'"):
        KernelTorchRLEnv(PendulumVectorEnv(2))
    with pytest.raises(ValueError, match="single-agent.*TagTorchRLEnv"):
        KernelTorchRLEnv(TagEnv(2, autoreset_mode=AutoresetMode.DISABLED, **TAG_PARAMS))
    with pytest.raises(TypeError, match="engine env"):
        KernelTorchRLEnv(gym.make_vec("CartPole-v1", num_envs=2))


def test_pendulum_box_actions_are_bounded_float32_and_float64_rewards_arrive_as_float32():
    env = KernelTorchRLEnv(PendulumVectorEnv(3, autoreset_mode="disabled"))
    assert env.batched_env.dtype == torch.float64
    assert torch.equal(env.action_spec.space.high, torch.full((3, 1), 2.0))
    td = env.reset()
    td["action"] = torch.tensor([[-2.0], [0.0], [2.0]])
    out = env.step(td)["next"]
    assert out["reward"].dtype == torch.float32 and out["reward"].shape == (3, 1)
    td["action"] = torch.tensor([[0.0], [0.0], [torch.nan]])
    with pytest.raises(ValueError, match=r"actions\[2, 0\] = nan must be finite"):
        env.step(td)


def test_bad_one_hot_tag_actions_raise_naming_one_hot_and_move_no_env():
    env = TagTorchRLEnv(2, **TAG_PARAMS)
    root = env.reset()
    before = env.batched_env.state_snapshot()
    root.update(env.full_action_spec.rand())
    root["runner", "action"][1, 2, :] = 0  # one block of one runner holds no 1
    with pytest.raises(ValueError, match="action must be one-hot"):
        env.step(root)
    after = env.batched_env.state_snapshot()
    assert all(torch.equal(before[k], after[k]) for k in before)
    root["runner", "action"] = root["runner", "action"].float()
    with pytest.raises(
        ValueError, match="action must be one-hot: torch.int64 .* got torch.float32"
    ):
        env.step(root)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cudasim)])
@pytest.mark.parametrize("name", ["cartpole", "tag"])
def test_one_hot_actions_add_no_host_read_to_a_step(name, device, count_host_reads):
    """The one-hot check is folded into the env's own index check: a step with one-hot actions
    makes the same host reads (GPU synchronisations) as one with indices."""
    reads = {}
    for encoding in (False, True):
        if name == "cartpole":
            env = CartPoleTorchRLEnv(3, device=device, categorical_action_encoding=encoding)
        else:
            env = TagTorchRLEnv(3, device, **TAG_PARAMS, categorical_action_encoding=encoding)
        env.set_seed(0)
        root = env.reset()
        torch.manual_seed(0)  # two steps on which no game ends (a finished game needs a reset)
        root.update(env.full_action_spec.rand())
        env.step(root)  # (TorchRL's first step checks more)
        _, reads[encoding] = count_host_reads(env.step, root)
    assert reads[False] == reads[True]


@pytest.mark.parametrize("action", [[[0, 1], [1, 1]], [[-100, -99], [1, 0]], [[0, 0], [1, 0]]])
def test_bad_one_hot_actions_raise_unless_validation_is_off(action):
    checked, unchecked = CartPoleTorchRLEnv(2), CartPoleTorchRLEnv(2, validate_actions=False)
    with pytest.raises(ValueError, match="action must be one-hot"):
        checked.step(checked.reset().set("action", torch.tensor(action)))
    out = unchecked.step(unchecked.reset().set("action", torch.tensor(action)))
    assert out["next", "observation"].shape == (2, 4)  # decoded by argmax, not checked
