"""The analytic gradient step (``analytic_step.AnalyticStep``) against autograd: ``EagerStep`` on
``ppo.minibatch_loss`` with torch's fused Adam, on random networks, minibatches and loss options;
and its choice by ``learner.make_steps``.

Tolerances. Both sides compute from the same inputs in a different order of operations (the
hand-written chain rule against autograd's, one flat norm against torch's per-tensor norms, the
heads as one product). In float64 that leaves differences near 1e-15, so the random search runs in
float64 with ``rtol=1e-9``: any error of the derivation (a missing term, a sign, a misrouted tie of
``torch.maximum`` or of a clamp) shows orders of magnitude above it. In float32, the dtype that
trains, minibatches of at most 40 samples (512 at the presets' shapes) through layers of at most
9 (64) units differ by ~1e-6 relative at most, so ``rtol=1e-4, atol=1e-6`` passes a correct step.
The log-ratio is compared as the new log-probability (log-ratio + old): it is a difference of two
log-probabilities and carries their absolute rounding, not its own relative one. The float32
search is derandomized: a ratio within rounding of the clip bounds may fall on either side in the
two computations, which moves that sample's gradient by more than rounding (a flip, not an error),
so it runs the same examples each time.
"""

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_envs.engine import first_compile
from gpu_envs.runs.config import ModelConfig, PolicyConfig
from gpu_envs.runs.speed import PhaseTimer
from gpu_envs.trainers import analytic_step, learner, ppo
from gpu_envs.trainers.analytic_step import AnalyticStep
from gpu_envs.trainers.game_faces import make_game
from gpu_envs.trainers.policy import ActorCritic, ContinuousActions, log_prob
from gpu_envs.trainers.rollout import Collector, PolicyGroup
from gpu_envs.trainers.sampling import TorchSampler

FLOAT32 = {"rtol": 1e-4, "atol": 1e-6}
FLOAT64 = {"rtol": 1e-9, "atol": 1e-12}
BACKWARD = torch.Tensor.backward  # what fabric.backward does on one process


def _network(obs_dim, nvec, cfg, generator, device, dtype):
    network = ActorCritic(obs_dim, nvec, cfg.model).to(device, dtype)
    with torch.no_grad():  # away from the orthogonal init's tiny actor: clipped ratios, saturation
        for parameter in network.parameters():
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=generator).to(parameter))
    return network


def _minibatch(network, nvec, cfg, size, zeros, generator):
    """A prepared minibatch around ``network``'s own outputs: ratios and values spread across
    their clip ranges, ``zeros`` of the samples invalid (weight 0)."""
    like = next(network.parameters())

    def randn(*shape):
        return torch.randn(shape, generator=generator).to(like)

    obs = randn(size, network.obs_dim)
    if isinstance(nvec, ContinuousActions):
        actions = randn(size, len(nvec))
    else:
        actions = torch.stack(
            [torch.randint(0, n, (size,), generator=generator) for n in nvec], 1
        ).to(like.device)
    with torch.no_grad():
        logits, values = network(obs)
        log_probs = log_prob(logits, actions, nvec)
    valid = torch.ones_like(values)
    valid[torch.randperm(size, generator=generator)[:zeros].to(like.device)] = 0.0
    data = {
        "obs": obs,
        "actions": actions,
        "log_probs": log_probs + 0.3 * randn(size),
        "values": values + 0.3 * randn(size),
        "advantages": randn(size),
        "returns": values + randn(size),
        "valid": valid,
        "rewards": torch.zeros_like(values),
    }
    return ppo.prepare(data, cfg)


def _pair(obs_dim, nvec, cfg, seed, device="cpu", dtype=torch.float32):
    """The same network twice, each with its torch (fused) Adam: one for autograd, one for the
    analytic step."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    eager_net = _network(obs_dim, nvec, cfg, generator, device, dtype)
    analytic_net = ActorCritic(obs_dim, nvec, cfg.model).to(device, dtype)
    analytic_net.load_state_dict(eager_net.state_dict())
    optimizers = [
        torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=True)
        for net in (eager_net, analytic_net)
    ]
    group = PolicyGroup("agent", cfg, eager_net, eager_net, optimizers[0], slice(0, 1), 1)
    eager = learner.EagerStep(group, BACKWARD, nvec)
    analytic = AnalyticStep(analytic_net, optimizers[1], cfg)
    return eager, analytic, (eager_net, analytic_net), optimizers, generator


def _assert_same_weights_and_adam(networks, optimizers, steps, tolerance):
    for a, b in zip(networks[0].parameters(), networks[1].parameters()):
        torch.testing.assert_close(b, a, **tolerance)
        want, got = optimizers[0].state[a], optimizers[1].state[b]
        assert got["step"].item() == want["step"].item() == steps
        torch.testing.assert_close(got["exp_avg"], want["exp_avg"], **tolerance)
        squares = {"rtol": tolerance["rtol"], "atol": tolerance["atol"] ** 1.5}  # ~ gradient**2
        torch.testing.assert_close(got["exp_avg_sq"], want["exp_avg_sq"], **squares)


def _check_against_autograd(
    obs_dim, nvec, cfg, size, zeros, seed, device="cpu", dtype=torch.float32
):
    """Step 1 by ``__call__``, steps 2-5 by one ``epochs`` call, each against autograd's."""
    tolerance = FLOAT64 if dtype == torch.float64 else FLOAT32
    eager, analytic, networks, optimizers, generator = _pair(
        obs_dim, nvec, cfg, seed, device, dtype
    )
    mb = _minibatch(networks[0], nvec, cfg, size, zeros, generator)
    (want_statistics, want_norm, want_ratio), (statistics, norm, log_ratio) = (
        eager(mb),
        analytic(mb),
    )
    torch.testing.assert_close(statistics, want_statistics, **FLOAT32)  # (float32 in both)
    torch.testing.assert_close(norm, want_norm, **tolerance)
    torch.testing.assert_close(
        log_ratio + mb["log_probs"], want_ratio + mb["log_probs"], **tolerance
    )
    _assert_same_weights_and_adam(networks, optimizers, 1, tolerance)

    steps = [eager(mb) for _ in range(4)]
    totals, first_deviation = analytic.epochs(mb, 4)
    want_totals = sum(torch.cat([statistics, norm.view(1)]) for statistics, norm, _ in steps)
    torch.testing.assert_close(totals, want_totals, **FLOAT32)
    want_deviation = ppo.max_ratio_deviation(steps[0][2], mb["weights"])
    torch.testing.assert_close(first_deviation, want_deviation, **FLOAT32)
    _assert_same_weights_and_adam(networks, optimizers, 5, tolerance)


ACTIONS = st.one_of(
    st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),  # MultiDiscrete heads
    st.integers(1, 3).map(ContinuousActions),  # Box dims
)
CASES = st.fixed_dictionaries(
    {
        "fc_dims": st.lists(st.integers(1, 9), max_size=3),
        "activation": st.sampled_from(["tanh", "relu"]),
        "nvec": ACTIONS,
        "algorithm": st.sampled_from(["PPO", "A2C"]),
        "clip_vloss": st.booleans(),
        "entropy_coeff": st.sampled_from([0.0, 0.01, 0.5]),
        "max_grad_norm": st.sampled_from([None, 0.05, 10.0]),  # off, always clipping, rarely
        "normalize_advantage": st.booleans(),
        "size": st.integers(1, 40),
        "zero_fraction": st.floats(0.0, 1.0),
        "seed": st.integers(0, 2**31 - 1),
    }
)


def _check_case(case, dtype):
    cfg = PolicyConfig(
        algorithm=case["algorithm"],
        lr=1e-3,
        clip_vloss=case["clip_vloss"],
        entropy_coeff=case["entropy_coeff"],
        clip_grad_norm=case["max_grad_norm"] is not None,
        max_grad_norm=case["max_grad_norm"] or 0.5,
        normalize_advantage=case["normalize_advantage"],
        model=ModelConfig(fc_dims=case["fc_dims"], activation=case["activation"]),
    )
    zeros = int(case["zero_fraction"] * case["size"])
    _check_against_autograd(3, case["nvec"], cfg, case["size"], zeros, case["seed"], dtype=dtype)


@settings(max_examples=150)
@given(case=CASES)
def test_the_analytic_step_trains_as_autograd_and_torch_adam_in_float64(case):
    _check_case(case, torch.float64)


@settings(max_examples=100, derandomize=True)
@given(case=CASES)
def test_the_analytic_step_trains_as_autograd_and_torch_adam_in_float32(case):
    _check_case(case, torch.float32)


@pytest.mark.parametrize(
    "nvec", [(2,), (3, 3, 2), ContinuousActions(2)], ids=["cartpole", "heads", "box"]
)
def test_the_presets_shapes_train_as_autograd(nvec):
    """CartPole's shapes (512 samples, 64 tanh units) and Pendulum's two layers, with every loss
    term on: the sums over hundreds of samples stay within the tolerance."""
    cfg = PolicyConfig(
        clip_vloss=True, entropy_coeff=0.01, model=ModelConfig(fc_dims=[64, 64], activation="tanh")
    )
    _check_against_autograd(4, nvec, cfg, 512, 37, seed=3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_the_analytic_step_trains_as_autograd_without_a_host_sync():
    cfg = PolicyConfig(clip_vloss=True, entropy_coeff=0.01, model=ModelConfig(fc_dims=[64]))
    for nvec in [(3, 3, 2), ContinuousActions(2)]:
        _check_against_autograd(4, nvec, cfg, 512, 37, seed=4, device="cuda")
    _, analytic, networks, _, generator = _pair(4, (2,), cfg, 5, "cuda")
    mb = _minibatch(networks[1], (2,), cfg, 512, 0, generator)
    analytic(mb)  # (the optimizer's state made)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        analytic(mb)
        analytic.epochs(mb, 3)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_the_analytic_step_follows_an_optimizer_state_loaded_from_a_checkpoint():
    """The optimizer's state is torch's Adam's own: a resume's ``load_state_dict`` (new state
    tensors) is what the next step updates, as autograd's step with the same state would."""
    cfg = PolicyConfig(model=ModelConfig(fc_dims=[8]))
    eager, analytic, networks, optimizers, generator = _pair(4, (2,), cfg, seed=7)
    mb = _minibatch(networks[0], (2,), cfg, 16, 3, generator)
    for step in (eager, analytic, eager, analytic):
        step(mb)
    before = [state["exp_avg"] for state in optimizers[1].state.values()]
    optimizers[1].load_state_dict(copy.deepcopy(optimizers[1].state_dict()))  # as read from a file
    after = [state["exp_avg"] for state in optimizers[1].state.values()]
    assert all(a is not b for a, b in zip(after, before))
    for step in (eager, analytic):
        step(mb)
    _assert_same_weights_and_adam(networks, optimizers, 3, FLOAT32)
    assert set(optimizers[1].state_dict()["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda net: torch.optim.AdamW(net.parameters()), "not a plain Adam"),
        (lambda net: torch.optim.Adam(net.parameters(), weight_decay=0.1), "not a plain Adam"),
        (lambda net: torch.optim.Adam(net.parameters(), amsgrad=True), "not a plain Adam"),
        (lambda net: torch.optim.SGD(net.parameters(), lr=0.1), "not a plain Adam"),
        (
            lambda net: torch.optim.Adam(list(net.parameters())[1:]),
            "does not hold exactly the network's weights",
        ),
        (
            lambda net: net.critic.requires_grad_(False) and torch.optim.Adam(net.parameters()),
            "frozen",
        ),
        (
            lambda net: net.critic.double() and torch.optim.Adam(net.parameters()),
            "not all float32",
        ),
        (
            lambda net: (
                net.torso.__setitem__(1, torch.nn.GELU()) or torch.optim.Adam(net.parameters())
            ),
            "linear layers each followed by tanh or relu",
        ),
    ],
)
def test_what_the_analytic_step_does_not_reproduce_is_named_and_refused(change, reason):
    network = ActorCritic(4, (2,), ModelConfig(fc_dims=[8]))
    optimizer = change(network)
    said = analytic_step.unsupported(network, optimizer)
    assert said is not None and reason in said
    with pytest.raises(ValueError, match=reason):
        AnalyticStep(network, optimizer, PolicyConfig())
    assert analytic_step.unsupported(torch.nn.Linear(4, 3), optimizer) == (
        "the network is not trainers.policy.ActorCritic"
    )


def _group_and_buffers(optimizer=torch.optim.Adam, **kwargs):
    torch.manual_seed(0)
    game = make_game("cartpole", 4, torch.device("cpu"), {"max_episode_steps": 500})
    cfg = PolicyConfig(update_epochs=2, num_minibatches=2, model=ModelConfig(fc_dims=[8]))
    module = ActorCritic(4, (2,), cfg.model)
    group = PolicyGroup(
        "agent", cfg, module, module, optimizer(module.parameters(), **kwargs), slice(0, 1), 1
    )
    collector = Collector(game, [group], 10, TorchSampler(0), PhaseTimer(torch.device("cpu")))
    collector.reset(seed=0)
    return group, collector


def _said(caplog):
    """The lines logged, each once however many handlers of the session it reached."""
    return [record.getMessage() for record in dict.fromkeys(caplog.records)]


@pytest.mark.parametrize("compile", [False, True])
def test_one_process_trains_with_the_analytic_step_and_says_so(compile, caplog, monkeypatch):
    group, collector = _group_and_buffers(lr=1e-3, fused=True)
    monkeypatch.setattr(first_compile.LOGGER, "propagate", True)  # to caplog
    with caplog.at_level("INFO", logger=first_compile.LOGGER.name):
        learner.make_steps([group], BACKWARD, collector.buffers, (2,), compile=compile, fuse=True)
    assert group.step.kind == "analytic"
    said = _said(caplog)
    assert said[0].startswith("gradient step of policy 'agent': analytic (")
    assert not any("compiling" in line for line in said)  # nothing compiles, whatever compile says
    before = [p.detach().clone() for p in group.module.parameters()]
    result = ppo.update(group, collector.collect()["agent"])
    assert result["first_ratio_deviation"].item() < 1e-5
    assert any(not torch.equal(a, b) for a, b in zip(before, group.module.parameters()))


def test_several_processes_or_another_optimizer_keep_todays_step_and_say_why(caplog, monkeypatch):
    group, collector = _group_and_buffers(optimizer=torch.optim.AdamW)
    distributed, _ = _group_and_buffers()
    monkeypatch.setattr(first_compile.LOGGER, "propagate", True)  # to caplog
    with caplog.at_level("INFO", logger=first_compile.LOGGER.name):
        learner.make_steps([group], BACKWARD, collector.buffers, (2,), compile=False, fuse=True)
        learner.make_steps(
            [distributed], BACKWARD, collector.buffers, (2,), compile=False, fuse=False
        )
    assert group.step.kind == distributed.step.kind == "eager"
    said = _said(caplog)
    assert said == [
        "gradient step of policy 'agent': eager, not the analytic step (the optimizer is not a "
        "plain Adam (one group, no weight decay, no AMSGrad); trainer.compile=true would compile "
        "it)",
        "gradient step of policy 'agent': eager, not the analytic step (several processes: DDP "
        "averages the gradients in the module's own backward; trainer.compile=true would compile "
        "it)",
    ]
