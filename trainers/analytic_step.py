"""The gradient step without a compiler: the minibatch loss's gradient derived by hand for
``policy.ActorCritic``, the global grad-norm clipping and torch's fused Adam, in a few dozen torch
calls.

On a CPU every torch call costs microseconds whatever its size, and autograd makes about a hundred
of them per step of a small network; ``trainer.compile`` fuses them at the price of seconds to
minutes of compiling in every process. Here the forward pass keeps what the backward pass needs,
and the backward pass is written out: the loss's gradient with respect to the network's outputs
(``ppo.minibatch_loss``: PPO's clipped surrogate or A2C's policy gradient, the value loss with or
without ``clip_vloss``, the entropy bonus, all weighted means), then through the linear heads and
the torso, into one flat buffer whose views are the parameters' gradients: the norm and the
clipping (``learner.clip_gradients``) are one call each, and torch's fused Adam kernel (what
``torch.optim.Adam(fused=True)`` runs) updates the network's parameters and the optimizer's own
state tensors in place, so the optimizer's ``state_dict`` stays torch's and checkpoints do not
know which step trained. The actor and critic heads are one matrix product, and the activations
are feature-major ([features, B]). Where torch's gradient splits a tie of ``torch.maximum`` in
halves, the tie is structural (a ratio inside the clip range, a value inside its clip range) and
the halves add up to one side's gradient, which is taken; the results agree with autograd to
rounding (``tests/trainers/test_analytic_step.py``). Everything runs under ``no_grad`` on the
tensors' device (CPU or CUDA), without a host read.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import nn

from gpu_envs.runs.config import PolicyConfig
from gpu_envs.trainers import fused_step
from gpu_envs.trainers.policy import ActorCritic, is_continuous
from gpu_envs.trainers.ppo import max_grad_norm, max_ratio_deviation

Batch = dict[str, torch.Tensor]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)  # the Gaussian's constant, as in trainers.policy
_TANH_BACKWARD = torch.ops.aten.tanh_backward.default  # autograd's own kernels
_RELU_BACKWARD = torch.ops.aten.threshold_backward.default


def unsupported(module: nn.Module, optimizer: torch.optim.Optimizer) -> str | None:
    """Why ``AnalyticStep`` cannot train ``module`` with ``optimizer``; None when it can."""
    # exactly ActorCritic: a subclass may compute something else
    if not isinstance(module, ActorCritic) or type(module) is not ActorCritic:
        return "the network is not trainers.policy.ActorCritic"
    if not fused_step.supports(optimizer):
        return "the optimizer is not a plain Adam (one group, no weight decay, no AMSGrad)"
    parameters = list(module.parameters())
    if {id(p) for p in optimizer.param_groups[0]["params"]} != {id(p) for p in parameters}:
        return "the optimizer does not hold exactly the network's weights"
    if not all(p.requires_grad for p in parameters):
        return "some of the network's weights are frozen"
    if len({(p.device, p.dtype) for p in parameters}) != 1 or parameters[0].dtype not in (
        torch.float32,
        torch.float64,
    ):
        return "the network's weights are not all float32 (or all float64) on one device"
    if parameters[0].device.type not in ("cpu", "cuda"):
        return "torch's fused Adam runs on the CPU and CUDA only"
    torso = list(module.torso)
    linear = all(type(layer) is nn.Linear for layer in torso[0::2])
    activations = all(type(layer) in (nn.Tanh, nn.ReLU) for layer in torso[1::2])
    if len(torso) % 2 or not (linear and activations):
        return "the torso is not linear layers each followed by tanh or relu"
    return None


class AnalyticStep:
    """One gradient step of ``module`` (an ``ActorCritic``) with ``optimizer``'s Adam on a
    minibatch, as ``learner.EagerStep`` with ``ppo.minibatch_loss`` makes it; call it once per
    minibatch: ``(statistics, grad_norm, log_ratio)``; ``epochs`` trains several steps on one
    minibatch. The learning rate is the optimizer's at each step (annealed); the loss's options are
    ``cfg``'s (the policy's config), which the run does not change.
    """

    kind = "analytic"

    def __init__(self, module: nn.Module, optimizer: torch.optim.Optimizer, cfg: PolicyConfig):
        reason = unsupported(module, optimizer)
        if reason is not None:
            raise ValueError(f"AnalyticStep: {reason}")
        assert isinstance(module, ActorCritic)
        self._optimizer, self._cfg = optimizer, cfg
        torso = list(module.torso)
        linears: list[nn.Linear] = torso[0::2]
        self._relu = [isinstance(layer, nn.ReLU) for layer in torso[1::2]]
        actor, critic = module.actor, module.critic
        nvec = module.action_nvec
        head: _Gaussian | _Categorical
        if is_continuous(nvec):
            head = _Gaussian(module.log_std, cfg.entropy_coeff)
        else:
            head = _Categorical(nvec, cfg.entropy_coeff)
        self._head = head

        # The gradients: views of one flat buffer, the two heads' weights (and biases) side by side
        # as the one product that computes both heads.
        order = [p for layer in linears for p in (layer.weight, layer.bias)]
        order += [actor.weight, critic.weight, actor.bias, critic.bias, *head.parameters()]
        sizes = [p.numel() for p in order]
        self._flat = torch.zeros(sum(sizes), dtype=order[0].dtype, device=order[0].device)
        grads = {id(p): view.view_as(p) for p, view in zip(order, self._flat.split(sizes))}
        # (weight, bias as a column, their gradients) of each torso layer
        self._layers = [
            (layer.weight, layer.bias.view(-1, 1), grads[id(layer.weight)], grads[id(layer.bias)])
            for layer in linears
        ]
        self._head_weights = [actor.weight, critic.weight]
        self._head_biases = [actor.bias.view(-1, 1), critic.bias.view(-1, 1)]
        ends = list(itertools.accumulate(sizes[: 2 * len(linears) + 4], initial=0))[-5:]
        self._grad_head_weight = self._flat[ends[0] : ends[2]].view(actor.out_features + 1, -1)
        self._grad_head_bias = self._flat[ends[2] : ends[4]]
        head.grads = [grads[id(p)] for p in head.parameters()]
        self._parameters = optimizer.param_groups[0]["params"]
        self._grad_list = [grads[id(p)] for p in self._parameters]
        # (Adam's step counts are float32 whatever the weights')
        self._ones = [torch.ones((), device=self._flat.device)] * len(self._parameters)
        self._epsilon = self._flat.new_tensor(1e-6)

        # The statistics: ppo.STEP_STATISTICS = mix @ (rows @ weights), rows the per-sample
        # surrogate, squared error, negative entropy, KL term and clipped flag.
        vf, ent = cfg.vf_loss_coeff, cfg.entropy_coeff
        self._mix = torch.tensor(
            [
                [1.0, 0.5 * vf, ent, 0.0, 0.0],
                [1.0, 0.0, 0.0, 0.0, 0.0],
                [0.0, 0.5, 0.0, 0.0, 0.0],
                [0.0, 0.0, -1.0, 0.0, 0.0],
                [0.0, 0.0, 0.0, 1.0, 0.0],
                [0.0, 0.0, 0.0, 0.0, 1.0],
            ],
            dtype=self._flat.dtype,
            device=self._flat.device,
        )

    @torch.no_grad()
    def __call__(self, minibatch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Train on ``minibatch`` (``ppo.prepare``'s): returns ``(statistics, grad_norm,
        log_ratio)``."""
        return self._step(self._prepare(minibatch))

    @torch.no_grad()
    def epochs(self, minibatch: Batch, epochs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Train ``epochs`` steps on the same ``minibatch``: returns the sum over the steps of
        ``[*statistics, grad_norm]`` and the first step's largest ratio deviation
        (``ppo.max_ratio_deviation``)."""
        batch = self._prepare(minibatch)
        statistics, grad_norms, log_ratios = zip(*(self._step(batch) for _ in range(epochs)))
        totals = torch.cat([torch.stack(statistics).sum(0), torch.stack(grad_norms).sum(0, True)])
        return totals, max_ratio_deviation(log_ratios[0], batch["weights"])

    def compile_for(self, minibatch: Batch) -> None:
        """Nothing to compile: the step is ready for any minibatch."""

    def _prepare(self, mb: Batch) -> Batch:
        """What every step on ``mb`` uses: its tensors and the weights of its loss's terms."""
        cfg, weights = self._cfg, mb["weights"]
        batch = {
            key: mb[key] for key in ("obs", "actions", "log_probs", "values", "returns", "weights")
        }
        batch["obs_by_feature"] = mb["obs"].t().contiguous()
        batch["neg_advantages"] = -mb["advantages"]
        if cfg.algorithm != "PPO":
            batch["grad_log_prob"] = batch["neg_advantages"] * weights
        batch["value_weights"] = cfg.vf_loss_coeff * weights
        self._head.prepare(batch)
        return batch

    def _step(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step on ``batch``: ``(statistics, grad_norm, log_ratio)``.

        The activations are feature-major, [features, B] (the transposed of the module's): every
        per-sample quantity is a contiguous row and a softmax reduces over a leading dimension,
        both several times faster on a CPU than the module's layout for a few actions.
        """
        cfg, weights = self._cfg, batch["weights"]
        x, inputs, outputs = batch["obs_by_feature"], [batch["obs"]], []
        for (weight, bias, _, _), relu in zip(self._layers, self._relu):
            x = torch.addmm(bias, weight, x)
            x = x.relu_() if relu else x.tanh_()
            outputs.append(x)
            inputs.append(x.t())
        head_weight = torch.cat(self._head_weights)
        out = torch.addmm(torch.cat(self._head_biases), head_weight, x)
        grad_out = torch.empty_like(out)
        new_log_prob, neg_entropy, saved = self._head.forward(out[:-1], batch)

        log_ratio = new_log_prob - batch["log_probs"]
        ratio = log_ratio.exp()
        neg_advantages = batch["neg_advantages"]
        if cfg.algorithm == "PPO":
            unclipped = neg_advantages * ratio
            clamped = ratio.clamp(1.0 - cfg.clip_param, 1.0 + cfg.clip_param)
            clipped = neg_advantages * clamped
            surrogate = torch.maximum(unclipped, clipped)
            # The larger side's gradient; inside the clip range the sides tie and each gets half
            # (the clamp passes its half). An outside tie (a rounding coincidence) gets 1, not 1/2.
            takes = clipped.le_(unclipped)  # (1.0 or 0.0, in place)
            grad_log_prob = (unclipped * weights).mul_(takes)
        else:
            surrogate = neg_advantages * new_log_prob
            grad_log_prob = batch["grad_log_prob"]
        error = self._value_loss(out[-1], batch, grad_out[-1])
        deviation = ratio - 1.0
        rows = torch.stack(
            [
                surrogate,
                error,
                neg_entropy,
                deviation - log_ratio,
                deviation.abs().gt_(cfg.clip_param),  # (1.0 or 0.0, in place)
            ]
        )
        statistics = torch.mv(self._mix, torch.mv(rows, weights)).float()
        self._head.backward(saved, grad_log_prob, batch, grad_out[:-1])

        torch.mm(grad_out, inputs[-1], out=self._grad_head_weight)
        torch.sum(grad_out, 1, out=self._grad_head_bias)
        grad, weight = grad_out, head_weight
        for index in reversed(range(len(self._layers))):
            grad = torch.mm(weight.t(), grad)
            if self._relu[index]:
                grad = _RELU_BACKWARD(grad, outputs[index], 0)
            else:
                grad = _TANH_BACKWARD(grad, outputs[index])
            weight, _, grad_weight, grad_bias = self._layers[index]
            torch.mm(grad, inputs[index], out=grad_weight)
            torch.sum(grad, 1, out=grad_bias)
        return statistics, self._clip_and_adam(), log_ratio

    def _value_loss(self, value: torch.Tensor, batch: Batch, grad: torch.Tensor) -> torch.Tensor:
        """The per-sample squared error of ``ppo.value_loss``; writes its gradient (with the
        value coefficient and the weights) into ``grad``."""
        cfg = self._cfg
        diff = value - batch["returns"]
        error = diff.square()
        if not (cfg.clip_vloss and cfg.algorithm == "PPO"):
            torch.mul(diff, batch["value_weights"], out=grad)
            return error
        old = batch["values"]
        moved = value - old
        clamped = moved.clamp(-cfg.clip_param, cfg.clip_param)
        clipped_diff = (old + clamped) - batch["returns"]
        clipped_error = clipped_diff.square()
        # torch.maximum's gradient goes to the larger side, halves to each on a tie: a value inside
        # its clip range, where the sides are the same to rounding. The clamp passes the clipped
        # side's inside its range only.
        clipped_diff.mul_(clamped == moved)
        chosen = torch.where(error >= clipped_error, diff, clipped_diff)
        torch.mul(chosen, batch["value_weights"], out=grad)
        return torch.maximum(error, clipped_error)

    def _clip_and_adam(self) -> torch.Tensor:
        """Clip the gradients, step torch's fused Adam; returns the gradients' norm before."""
        norm = torch.linalg.vector_norm(self._flat)
        max_norm = max_grad_norm(self._cfg)
        if max_norm != float("inf"):  # as learner.clip_gradients
            # max_norm / (norm + 1e-6), as torch divides a number by a tensor
            self._flat.mul_((norm + self._epsilon).reciprocal_().mul_(max_norm).clamp_(max=1.0))
        group = self._optimizer.param_groups[0]
        states = [fused_step.adam_state(self._optimizer, p) for p in self._parameters]
        steps = [state["step"] for state in states]
        beta1, beta2 = group["betas"]
        # torch.optim.adam._fused_adam on one device and dtype, without its regrouping
        torch._foreach_add_(steps, self._ones)
        torch._fused_adam_(
            self._parameters,
            self._grad_list,
            [state["exp_avg"] for state in states],
            [state["exp_avg_sq"] for state in states],
            [],
            steps,
            amsgrad=False,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=0.0,
            eps=group["eps"],
            maximize=False,
        )
        return norm


class _Categorical:
    """MultiDiscrete heads: a softmax per head, the consecutive heads of one size as one batched
    softmax (a segment), on logits [heads * size, B]."""

    def __init__(self, nvec: Sequence[int], entropy_coeff: float):
        self.entropy_coeff = entropy_coeff
        self.segments = []  # (first logit, first head, heads, size)
        logit = head = 0
        for size, run in itertools.groupby(nvec):
            heads = len(list(run))
            self.segments.append((logit, head, heads, size))
            logit, head = logit + heads * size, head + heads
        self.grads: list[torch.Tensor] = []

    def parameters(self) -> list[torch.Tensor]:
        return []

    def prepare(self, batch: Batch) -> None:
        """Each segment's actions as indices [heads, 1, B] and one-hot [heads, size, B]."""
        actions = batch["actions"]
        for index, (_, head, heads, size) in enumerate(self.segments):
            chosen = actions[:, head : head + heads].t().unsqueeze(1)
            batch[f"chosen{index}"] = chosen
            batch[f"one_hot{index}"] = batch["weights"].new_zeros(heads, size, len(actions))
            batch[f"one_hot{index}"].scatter_(1, chosen, 1.0)
        if self.entropy_coeff:
            batch["grad_entropy"] = self.entropy_coeff * batch["weights"]

    def forward(self, logits: torch.Tensor, batch: Batch):
        """The joint log-probability [B] of the actions, the negative joint entropy [B], and
        what ``backward`` needs."""
        log_probs, neg_entropies, saved = [], [], []
        for index, (first, _, heads, size) in enumerate(self.segments):
            log_p = torch.log_softmax(logits[first : first + heads * size].view(heads, size, -1), 1)
            p = log_p.exp()
            neg_entropy = (p * log_p).sum(1)
            log_probs.append(log_p.gather(1, batch[f"chosen{index}"]))
            neg_entropies.append(neg_entropy)
            saved.append((log_p, p, neg_entropy))
        return _sum_of_heads(log_probs), _sum_of_heads(neg_entropies), saved

    def backward(self, saved, grad_log_prob: torch.Tensor, batch: Batch, grad: torch.Tensor):
        """Write the gradient of the logits into ``grad``: ``g (onehot - p)`` for the
        log-probability's ``g``, ``c w p (log p + H)`` for the entropy bonus's ``-c w H``."""
        for index, (first, _, heads, size) in enumerate(self.segments):
            log_p, p, neg_entropy = saved[index]
            out = grad[first : first + heads * size].view(heads, size, -1)
            policy = batch[f"one_hot{index}"] - p
            if self.entropy_coeff:
                entropy = p * (log_p - neg_entropy.unsqueeze(1))
                torch.addcmul(policy.mul_(grad_log_prob), entropy, batch["grad_entropy"], out=out)
            else:
                torch.mul(policy, grad_log_prob, out=out)


class _Gaussian:
    """A diagonal Gaussian head: the means [D, B] from the actor, a state-independent
    ``log_std``."""

    def __init__(self, log_std: torch.Tensor, entropy_coeff: float):
        self.log_std, self.entropy_coeff = log_std, entropy_coeff
        self.grads: list[torch.Tensor] = []

    def parameters(self) -> list[torch.Tensor]:
        return [self.log_std]

    def prepare(self, batch: Batch) -> None:
        batch["actions_by_dim"] = batch["actions"].t().contiguous()
        if self.entropy_coeff:
            batch["grad_entropy"] = self.entropy_coeff * batch["weights"].sum()

    def forward(self, mean: torch.Tensor, batch: Batch):
        """The log-probability [B] of the actions, the negative entropy [B] (summed over the dims
        in ``policy``'s order), and what ``backward`` needs."""
        log_std = self.log_std.unsqueeze(1)
        inverse_std = torch.exp(-log_std)
        z = (batch["actions_by_dim"] - mean).mul_(inverse_std)
        terms = (-0.5 * z).mul_(z).sub_(log_std).sub_(_LOG_SQRT_2PI)
        entropy = (self.log_std + 0.5).add_(_LOG_SQRT_2PI).sum()
        return terms.sum(0), entropy.neg_().expand(mean.shape[1]), (z, inverse_std)

    def backward(self, saved, grad_log_prob: torch.Tensor, batch: Batch, grad: torch.Tensor):
        """Write the means' gradient into ``grad`` and ``log_std``'s into its own: d log p / d mean
        = z / std, d log p / d log_std = z^2 - 1, d entropy / d log_std = 1 per sample."""
        z, inverse_std = saved
        squares = z * z
        torch.mul(z.mul_(inverse_std), grad_log_prob, out=grad)
        grad_log_std = self.grads[0]
        torch.mv(squares.sub_(1.0), grad_log_prob, out=grad_log_std)
        if self.entropy_coeff:
            grad_log_std.sub_(batch["grad_entropy"])


def _sum_of_heads(parts: list[torch.Tensor]) -> torch.Tensor:
    """The sum over the heads of per-segment values [heads, B] or [heads, 1, B]."""
    if len(parts) == 1 and len(parts[0]) == 1:
        return parts[0].view(-1)
    return torch.cat([part.flatten(0, -2) for part in parts]).sum(0)
