"""``trainer.compile`` on one process: a whole gradient step (loss, gradient, clipping, Adam) as
one graph.

On a CPU a small network's gradient step is made of a hundred tiny torch calls, each costing
microseconds of dispatch whatever its size. Here the minibatch loss, its gradient
(``torch.func.grad``), the global grad-norm clipping and the Adam update are traced together by
``torch.compile`` into one graph, which updates the network's parameters and the
``torch.optim.Adam``'s own state tensors (``step``, ``exp_avg``, ``exp_avg_sq``) in place. The
optimizer's ``state_dict`` therefore stays what torch's Adam writes: checkpoints and resumes do not
know which step trained. An update whose epochs each train on the whole batch (``num_minibatches:
1``, the CartPole preset's) is one compiled call for all its epochs (``epochs``): the epoch loop is
unrolled into the graph, so the host enters compiled code once per update, not once per epoch.
The update is torch's own functional Adam (``torch.optim.adam.adam``; no
weight decay, no AMSGrad) and the norm torch's ``get_total_norm``, clipped as
``torch.nn.utils.clip_grad_norm_`` clips; results agree with the eager step to rounding.

Under DDP the gradients are averaged by DDP's backward hooks, which a functional gradient bypasses:
distributed runs compile the loss alone (``learner.make_step``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.func import functional_call, grad
from torch.optim.adam import adam

from gpu_envs.trainers.ppo import max_grad_norm, max_ratio_deviation, schedule

LossFn = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def supports(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` is a plain Adam this step reproduces (one parameter group, no weight
    decay, no AMSGrad)."""
    if type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1:
        return False
    group = optimizer.param_groups[0]
    return not (
        group["weight_decay"] or group["amsgrad"] or group["maximize"] or group["differentiable"]
    )


class FusedAdamStep:
    """One compiled gradient step of ``module`` with ``optimizer``'s Adam; call it once per
    minibatch.

    ``loss_fn(model, minibatch, nvec, cfg) -> (loss, statistics, log_ratio)`` is the minibatch
    loss (``ppo.minibatch_loss``); the call returns ``(statistics, grad_norm, log_ratio)``.
    """

    kind = "fused"

    def __init__(
        self,
        module: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: LossFn,
        nvec,
        cfg,
    ):
        if not supports(optimizer):
            raise ValueError(
                "FusedAdamStep needs a torch.optim.Adam with one parameter group, "
                "no weight decay, no AMSGrad, not maximize"
            )
        self._module = module
        self._optimizer = optimizer
        self._loss_fn, self._nvec, self._cfg = loss_fn, nvec, cfg
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        self._parameters = [p for _, p in named]
        # Detached views share the parameters' storage: the step writes the weights in place, and
        # load_state_dict copies into that same storage.
        self._weights = {name: p.detach() for name, p in named}
        self._compiled = torch.compile(_adam_step)
        self._compiled_epochs = torch.compile(_adam_epochs)

    def __call__(
        self, minibatch: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Train on ``minibatch``: returns ``(statistics, grad_norm, log_ratio)``."""
        return self._run(
            self._compiled,
            self._weights,
            [adam_state(self._optimizer, p) for p in self._parameters],
            minibatch,
        )

    def epochs(
        self, minibatch: dict[str, torch.Tensor], epochs: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Train ``epochs`` steps on the same ``minibatch`` in one compiled call: returns the sum
        over the steps of ``[*statistics, grad_norm]`` and the first step's largest ratio
        deviation (``ppo.max_ratio_deviation``)."""
        states = [adam_state(self._optimizer, p) for p in self._parameters]
        return self._run(self._compiled_epochs, self._weights, states, minibatch, epochs)

    def compile_for(self, minibatch: dict[str, torch.Tensor]) -> None:
        """Compile for ``minibatch``'s shapes what the update will call (the step, or, when the
        update's several epochs each train on the whole batch, ``epochs``) on copies: the weights
        and the optimizer do not move."""
        epochs, minibatches, _ = schedule(self._cfg, len(minibatch["weights"]))
        if minibatches == 1 and epochs > 1:
            self._run(self._compiled_epochs, *self._scratch(), minibatch, epochs)
        else:
            self._run(self._compiled, *self._scratch(), minibatch)

    def _scratch(self) -> tuple[dict[str, torch.Tensor], list[dict[str, torch.Tensor]]]:
        """Copies of the weights and fresh Adam states, to compile on."""
        weights = {name: weight.clone() for name, weight in self._weights.items()}
        return weights, [_new_adam_state(p) for p in self._parameters]

    def _run(
        self,
        compiled: Callable,
        weights: dict[str, torch.Tensor],
        states: list[dict[str, torch.Tensor]],
        minibatch: dict[str, torch.Tensor],
        *extra: int,
    ):
        group = self._optimizer.param_groups[0]
        return compiled(
            self._module,
            self._loss_fn,
            weights,
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [s["step"] for s in states],
            torch.tensor(group["lr"]),
            minibatch,
            self._nvec,
            self._cfg,
            max_grad_norm(self._cfg),
            group["betas"],
            group["eps"],
            *extra,
        )


def adam_state(
    optimizer: torch.optim.Optimizer, parameter: torch.Tensor
) -> dict[str, torch.Tensor]:
    """``optimizer``'s state of ``parameter``, created on first use as torch's Adam does."""
    state = optimizer.state[parameter]
    if not state:
        state.update(_new_adam_state(parameter))
    return state


def _new_adam_state(parameter: torch.Tensor) -> dict[str, torch.Tensor]:
    """Zero Adam state for ``parameter``, shaped as torch's (fused) Adam makes it."""
    return {
        "step": torch.zeros((), dtype=torch.float32, device=parameter.device),
        "exp_avg": torch.zeros_like(parameter, memory_format=torch.preserve_format),
        "exp_avg_sq": torch.zeros_like(parameter, memory_format=torch.preserve_format),
    }


def _adam_step(
    module,
    loss_fn,
    weights,
    exp_avgs,
    exp_avg_sqs,
    steps,
    lr,
    minibatch,
    nvec,
    cfg,
    max_norm,
    betas,
    eps,
):
    """The traced step: gradient of the loss, clipping to ``max_norm``, torch's Adam update, in
    place."""

    def loss_of(params):
        loss, statistics, log_ratio = loss_fn(
            lambda obs: functional_call(module, params, (obs,)), minibatch, nvec, cfg
        )
        return loss, (statistics, log_ratio)

    grads, (statistics, log_ratio) = grad(loss_of, has_aux=True)(weights)
    grads = list(grads.values())
    grad_norm = torch.nn.utils.get_total_norm(grads)  # as learner.clip_gradients
    scale = torch.clamp(max_norm / (grad_norm + 1e-6), max=1.0)
    beta1, beta2 = betas
    with torch.no_grad():
        adam(
            list(weights.values()),
            [g * scale for g in grads],
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            foreach=False,
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=lr,
            weight_decay=0.0,
            eps=eps,
            maximize=False,
        )
    return statistics, grad_norm, log_ratio


def _adam_epochs(module, loss_fn, weights, exp_avgs, exp_avg_sqs, steps, lr, minibatch, *rest):
    """``epochs`` (the last of ``rest``) traced steps on one minibatch: the summed
    ``[*statistics, grad_norm]`` and the first step's ``max_ratio_deviation``."""
    *arguments, epochs = rest
    totals, first_deviation = None, None
    for _ in range(epochs):
        statistics, grad_norm, log_ratio = _adam_step(
            module, loss_fn, weights, exp_avgs, exp_avg_sqs, steps, lr, minibatch, *arguments
        )
        row = torch.cat([statistics, grad_norm.reshape(1)])
        totals = row if totals is None else totals + row
        if first_deviation is None:
            first_deviation = max_ratio_deviation(log_ratio, minibatch["weights"])
    return totals, first_deviation
