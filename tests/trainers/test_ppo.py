"""PPO/A2C pieces against hand-computed values, and the rollout's NEXT_STEP bootstrap (CartPole)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.runs.config import ModelConfig, PolicyConfig
from gpu_envs.runs.speed import PhaseTimer
from gpu_envs.trainers import ppo, rollout
from gpu_envs.trainers.game_faces import make_game
from gpu_envs.trainers.learner import clip_gradients, make_step
from gpu_envs.trainers.policy import ActorCritic, log_prob_entropy
from gpu_envs.trainers.rollout import Collector, PolicyGroup
from gpu_envs.trainers.sampling import NumbaSampler, TorchSampler

REWARDS = torch.tensor([[1.0], [1.0], [1.0]])
VALUES = torch.tensor([[0.5], [0.6], [0.7]])
NEXT_VALUE = torch.tensor([0.8])


def _gae(terminated, done):
    return ppo.compute_gae(
        REWARDS,
        VALUES,
        NEXT_VALUE,
        torch.tensor(terminated).view(3, 1),
        torch.tensor(done).view(3, 1),
        gamma=0.9,
        gae_lambda=0.8,
    )


def test_gae_without_episode_end():
    adv, ret = _gae([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    # deltas: 1 + .9*.6 - .5 = 1.04, 1 + .9*.7 - .6 = 1.03, 1 + .9*.8 - .7 = 1.02;
    # lambda * gamma = .72
    a2 = 1.02
    a1 = 1.03 + 0.72 * a2
    a0 = 1.04 + 0.72 * a1
    torch.testing.assert_close(adv.flatten(), torch.tensor([a0, a1, a2]))
    torch.testing.assert_close(ret, adv + VALUES)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(1, 12),
    envs=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
    gamma=st.floats(0.0, 1.0),
    gae_lambda=st.floats(0.0, 1.0),
)
def test_gae_matches_the_textbook_recursion_element_by_element(
    steps, envs, seed, gamma, gae_lambda
):
    """Any rollout: ``A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}``, ``delta_t = r_t +
    gamma * (1 - terminated_t) * V_{t+1} - V_t`` (``V_T`` the bootstrap), computed in Python
    floats one env at a time."""
    g = torch.Generator().manual_seed(seed)
    rewards, values = torch.randn(steps, envs, generator=g), torch.randn(steps, envs, generator=g)
    next_value = torch.randn(envs, generator=g)
    terminated = (torch.rand(steps, envs, generator=g) < 0.2).float()
    done = torch.maximum(terminated, (torch.rand(steps, envs, generator=g) < 0.2).float())
    adv, ret = ppo.compute_gae(rewards, values, next_value, terminated, done, gamma, gae_lambda)
    expected = torch.zeros(steps, envs, dtype=torch.float64)
    for e in range(envs):
        following_adv = 0.0
        for t in reversed(range(steps)):
            following = float(next_value[e] if t == steps - 1 else values[t + 1, e])
            delta = float(rewards[t, e]) + gamma * (1 - float(terminated[t, e])) * following
            delta -= float(values[t, e])
            following_adv = delta + gamma * gae_lambda * (1 - float(done[t, e])) * following_adv
            expected[t, e] = following_adv
    torch.testing.assert_close(adv.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret, adv + values)


def test_gae_termination_does_not_bootstrap():
    adv, _ = _gae([0.0, 1.0, 0.0], [0.0, 1.0, 0.0])
    # step 1 ends by a rule: delta = 1 - .6 = .4 and the trace stops there.
    torch.testing.assert_close(adv.flatten(), torch.tensor([1.04 + 0.72 * 0.4, 0.4, 1.02]))


def test_gae_truncation_bootstraps_from_final_observation_value():
    adv, _ = _gae([0.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    # step 1 is cut by the time limit: delta = 1 + .9 * V(final obs) - .6,
    # with V(final obs) = values[2].
    torch.testing.assert_close(adv.flatten(), torch.tensor([1.04 + 0.72 * 1.03, 1.03, 1.02]))


def test_clipped_surrogate_by_hand():
    new = torch.log(torch.tensor([1.5, 1.5, 0.5, 1.1]))
    old = torch.zeros(4)
    adv = torch.tensor([1.0, -1.0, 1.0, 2.0])
    weights = ppo.mean_weights(torch.ones(4))
    loss, log_ratio = ppo.policy_loss(new, old, adv, weights, clip_param=0.2, clipped=True)
    # per entry: max(-A r, -A clip(r)): -1.2, 1.5, -0.5, -2.2
    assert loss.item() == pytest.approx((-1.2 + 1.5 - 0.5 - 2.2) / 4)
    stats = ppo.ratio_statistics(log_ratio, weights, clip_param=0.2)
    assert stats["clip_fraction"].item() == pytest.approx(0.75)
    ratios = [1.5, 1.5, 0.5, 1.1]
    assert stats["approx_kl"].item() == pytest.approx(sum(r - 1 - math.log(r) for r in ratios) / 4)
    assert ppo.max_ratio_deviation(log_ratio, weights).item() == pytest.approx(0.5)


# One entry per case of the clipped surrogate max(-A r, -A clip(r)) with clip_param 0.2: the
# clipped term wins when the ratio moved past the clip range in the advantage's favour (entries 0
# and 1); the unclipped term wins when it moved against it (2 and 3) or stayed inside (4).
RATIOS = [1.5, 0.5, 1.5, 0.5, 1.1]
ADVANTAGES = [1.0, -1.0, -1.0, 1.0, 2.0]
CLIPPED_BRANCH = [True, True, False, False, False]


def test_clipped_surrogate_takes_the_pessimistic_term_entry_by_entry():
    new = torch.log(torch.tensor(RATIOS)).requires_grad_()
    adv = torch.tensor(ADVANTAGES)
    per_entry = []
    for i in range(len(RATIOS)):
        weights = torch.nn.functional.one_hot(torch.tensor(i), len(RATIOS)).float()
        loss, _ = ppo.policy_loss(new, torch.zeros(5), adv, weights, clip_param=0.2, clipped=True)
        (grad,) = torch.autograd.grad(loss, new)
        per_entry.append(loss.item())
        # A clipped entry's ratio is a constant: no gradient flows through it.
        assert (grad[i].item() == 0.0) == CLIPPED_BRANCH[i], i
    assert per_entry == pytest.approx([-1.2, 0.8, 1.5, -0.5, -2.2])
    unclipped = [-a * r for a, r in zip(ADVANTAGES, RATIOS)]
    for i, clipped in enumerate(CLIPPED_BRANCH):
        assert (per_entry[i] != pytest.approx(unclipped[i])) == clipped, i
    weights = ppo.mean_weights(torch.ones(5))
    loss, _ = ppo.policy_loss(new, torch.zeros(5), adv, weights, clip_param=0.2, clipped=True)
    assert loss.item() == pytest.approx(sum(per_entry) / 5)
    assert loss.item() != pytest.approx(sum(unclipped) / 5)


def test_a2c_loss_is_plain_policy_gradient():
    new = torch.tensor([-0.5, -2.0])
    loss, _ = ppo.policy_loss(
        new,
        new.detach(),
        torch.tensor([2.0, -1.0]),
        ppo.mean_weights(torch.ones(2)),
        0.2,
        clipped=False,
    )
    assert loss.item() == pytest.approx((2.0 * 0.5 + -1.0 * 2.0) / 2)


def test_value_clipping_by_hand():
    new, old, ret = torch.tensor([2.0, 0.5]), torch.tensor([1.0, 1.0]), torch.tensor([0.0, 2.0])
    # entry 0: max((2-0)^2, (1.2-0)^2) = 4 ; entry 1: max((0.5-2)^2, (0.8-2)^2) = 2.25
    clipped = ppo.value_loss(
        new, old, ret, ppo.mean_weights(torch.ones(2)), clip_param=0.2, clip_vloss=True
    )
    assert clipped.item() == pytest.approx(0.5 * (4.0 + 2.25) / 2)
    plain = ppo.value_loss(
        new, old, ret, ppo.mean_weights(torch.ones(2)), clip_param=0.2, clip_vloss=False
    )
    assert plain.item() == pytest.approx(0.5 * (4.0 + 2.25) / 2)
    new = torch.tensor([1.5])
    assert ppo.value_loss(
        new, torch.tensor([1.0]), torch.tensor([1.5]), ppo.mean_weights(torch.ones(1)), 0.2, True
    ).item() == pytest.approx(0.5 * 0.3**2)


def test_value_clipping_takes_the_larger_error_entry_by_entry():
    # new, old, returns: entries 0 and 1 moved more than 0.2 from the old value towards the
    # return, so the clipped value's error is the larger; entry 2 moved away from it; entry 3
    # moved less than 0.2.
    new = torch.tensor([2.0, 0.0, 2.0, 1.1], requires_grad=True)
    old = torch.tensor([1.0, 1.0, 1.0, 1.0])
    ret = torch.tensor([2.0, 0.0, 0.0, 2.0])
    clipped_branch = [True, True, False, False]
    errors = [0.8**2, 0.8**2, 2.0**2, 0.9**2]
    plain_errors = [0.0, 0.0, 2.0**2, 0.9**2]
    for i in range(4):
        weights = torch.nn.functional.one_hot(torch.tensor(i), 4).float()
        loss = ppo.value_loss(new, old, ret, weights, clip_param=0.2, clip_vloss=True)
        (grad,) = torch.autograd.grad(loss, new)
        assert loss.item() == pytest.approx(0.5 * errors[i]), i
        assert (grad[i].item() == 0.0) == clipped_branch[i], i
    weights = ppo.mean_weights(torch.ones(4))
    clipped = ppo.value_loss(new, old, ret, weights, clip_param=0.2, clip_vloss=True)
    plain = ppo.value_loss(new, old, ret, weights, clip_param=0.2, clip_vloss=False)
    assert clipped.item() == pytest.approx(0.5 * sum(errors) / 4)
    assert plain.item() == pytest.approx(0.5 * sum(plain_errors) / 4)
    assert clipped.item() > plain.item()


def test_masked_entries_do_not_count():
    mask = torch.tensor([1.0, 1.0, 0.0])
    adv = torch.tensor([1.0, 3.0, 1000.0])
    assert ppo.masked_mean(adv, mask).item() == pytest.approx(2.0)
    assert ppo.masked_std(adv, mask).item() == pytest.approx(math.sqrt(2.0))
    new = torch.zeros(3, requires_grad=True)
    loss, _ = ppo.policy_loss(new, torch.zeros(3), adv, ppo.mean_weights(mask), 0.2, clipped=True)
    loss.backward()
    assert new.grad[2].item() == 0.0 and new.grad[0].item() != 0.0


def test_explained_variance():
    returns = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert ppo.explained_variance(returns, returns, torch.ones(4)).item() == pytest.approx(1.0)
    assert ppo.explained_variance(torch.zeros(4), returns, torch.ones(4)).item() == pytest.approx(
        0.0, abs=1e-6
    )
    # residuals [0, 1, 0, 1]: variance 1/3 against variance 5/3 of the returns
    values = returns - torch.tensor([0.0, 1.0, 0.0, 1.0])
    assert ppo.explained_variance(values, returns, torch.ones(4)).item() == pytest.approx(
        1.0 - (1 / 3) / (5 / 3)
    )


def test_log_prob_and_entropy_of_multidiscrete_heads():
    logits = torch.tensor([[0.0, 0.0, 1.0, 2.0, 3.0]])
    logp, ent = log_prob_entropy(logits, torch.tensor([[1, 2]]), (2, 3))
    p2 = torch.softmax(torch.tensor([1.0, 2.0, 3.0]), 0)
    assert logp.item() == pytest.approx(math.log(0.5) + math.log(p2[2].item()), rel=1e-6)
    assert ent.item() == pytest.approx(math.log(2) - (p2 * p2.log()).sum().item(), rel=1e-6)


@pytest.mark.parametrize("kind", [TorchSampler, NumbaSampler])
def test_samplers_follow_the_probabilities(kind):
    torch.manual_seed(0)
    logits = torch.log(torch.tensor([[0.2, 0.8, 0.5, 0.25, 0.25]])).repeat(20000, 1)
    actions = kind(3)(logits, (2, 3))
    assert actions.shape == (20000, 2) and actions.dtype == torch.int64
    assert actions[:, 0].float().mean().item() == pytest.approx(0.8, abs=0.02)
    assert (actions[:, 1] == 0).float().mean().item() == pytest.approx(0.5, abs=0.02)
    assert int(actions.min()) >= 0 and int(actions[:, 1].max()) <= 2


def _collector(max_episode_steps, steps, envs=4, name="cartpole", reward_shaping=0.0):
    torch.manual_seed(0)
    game = make_game(name, envs, torch.device("cpu"), {"max_episode_steps": max_episode_steps})
    cfg = PolicyConfig(update_epochs=2, num_minibatches=2, model=ModelConfig(fc_dims=[8]))
    module = ActorCritic(game.obs_dim, game.action_nvec, cfg.model)
    group = PolicyGroup(
        "agent",
        cfg,
        module,
        module,
        torch.optim.Adam(module.parameters(), lr=1e-3, eps=1e-5),
        slice(0, 1),
        1,
    )
    timer = PhaseTimer(torch.device("cpu"))
    collector = Collector(
        game, [group], steps, TorchSampler(0), timer, reward_shaping=reward_shaping
    )
    collector.reset(seed=0)
    return collector, group


def test_rollout_bootstraps_truncation_from_final_obs_and_masks_reset_step():
    collector, group = _collector(max_episode_steps=5, steps=12)
    buf = collector.collect()["agent"]
    # 5-step episodes cannot fail: every env truncates at steps 4 and 10, resets at 5 and 11.
    done = buf.done[:, :, 0]
    assert done[4].all() and done[10].all() and done.sum() == 2 * 4
    assert buf.terminated.sum() == 0
    assert (buf.valid[[5, 11], :, 0] == 0).all() and buf.valid.sum() == 10 * 4
    # The obs stored at the reset step is the finished episode's final obs, and its value was
    # computed on it: that value is the bootstrap of the truncated step.
    with torch.no_grad():
        _, v = group.module(buf.obs[5, :, 0])
    torch.testing.assert_close(buf.values[5, :, 0], v)
    adv, _ = ppo.compute_gae(
        buf.rewards, buf.values, buf.next_value, buf.terminated, buf.done, 0.99, 0.95
    )
    torch.testing.assert_close(adv[4], buf.rewards[4] + 0.99 * buf.values[5] - buf.values[4])
    stats = collector.episode_stats(group)
    assert stats["episode_count"].item() == 8 and stats["return_sum"].item() == 8 * 5.0
    assert stats["length_sum"].item() == 8 * 5.0


def test_rollout_termination_ends_episode_without_bootstrap():
    collector, _ = _collector(max_episode_steps=500, steps=40)
    buf = collector.collect()["agent"]
    # random actions end CartPole episodes by termination well within 40 steps
    assert buf.terminated.sum() > 0
    torch.testing.assert_close(buf.terminated, buf.done)


def test_shaping_reward_by_hand():
    phi, next_phi = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0, 5.0, 6.0])
    terminated, valid = torch.tensor([0.0, 1.0, 0.0]), torch.tensor([1.0, 1.0, 0.0])
    shaped = rollout.shaping_reward(phi, next_phi, terminated, valid, 0.5)
    torch.testing.assert_close(shaped, torch.tensor([0.5 * 4.0 - 1.0, -2.0, 0.0]))


def test_reward_shaping_telescopes_and_leaves_the_episode_returns_alone():
    k, gamma = 30.0, 0.99  # PolicyConfig's gamma
    plain, group = _collector(5, 12, name="mountaincar")
    plain_buf = plain.collect()["agent"]
    shaped, _ = _collector(5, 12, name="mountaincar", reward_shaping=k)
    buf = shaped.collect()["agent"]
    torch.testing.assert_close(plain_buf.rewards, plain.rewards)  # off: the env's rewards
    torch.testing.assert_close(buf.obs, plain_buf.obs)  # the same episodes
    torch.testing.assert_close(shaped.rewards, plain.rewards)
    assert shaped.episode_stats(group)["return_sum"].item() == 8 * -5.0
    bonus = (buf.rewards - plain_buf.rewards)[:, :, 0]
    assert (bonus[:5] != 0).all()
    assert (bonus[[5, 11]] == 0).all()  # reset steps
    phi = k * shaped.game.potential(buf.obs)[:, :, 0]  # [T, E]
    discounts = gamma ** torch.arange(5.0)[:, None]
    for first in (0, 6):  # 5-step episodes truncated at steps 4 and 10
        expected = gamma**5 * phi[first + 5] - phi[first]
        torch.testing.assert_close((discounts * bonus[first : first + 5]).sum(0), expected)


def test_first_minibatch_ratio_is_one_and_update_changes_weights():
    collector, group = _collector(max_episode_steps=500, steps=16)
    buf = collector.collect()["agent"]
    before = [p.detach().clone() for p in group.module.parameters()]

    group.step = make_step(group, torch.Tensor.backward, (2,))
    assert group.step.kind == "eager"
    stats = ppo.update(group, buf)
    assert stats["first_ratio_deviation"].item() < 1e-6
    assert stats["approx_kl"].item() > 0.0  # later minibatches see the updated weights
    assert any(not torch.equal(a, b) for a, b in zip(before, group.module.parameters()))


def test_clip_gradients_matches_torch_and_returns_the_norm_before_clipping():
    torch.manual_seed(0)
    ours, reference = ActorCritic(4, (2,), ModelConfig()), ActorCritic(4, (2,), ModelConfig())
    reference.load_state_dict(ours.state_dict())
    obs = torch.randn(32, 4)
    for model in (ours, reference):
        logits, values = model(obs)
        (logits.square().sum() + values.sum()).backward()
    expected = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    norm = clip_gradients(list(ours.parameters()), 0.5)
    assert norm.item() == pytest.approx(expected.item(), rel=1e-6) and norm.item() > 0.5
    for a, b in zip(ours.parameters(), reference.parameters()):
        torch.testing.assert_close(a.grad, b.grad)
    assert clip_gradients(list(ours.parameters()), float("inf")).item() == pytest.approx(
        0.5, rel=1e-5
    )
