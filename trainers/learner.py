"""How the policies learn: their optimizer, their gradient step (chosen once), one iteration.

A trained policy's gradient step is one of four, chosen once by ``make_step`` when training
starts and kept in ``PolicyGroup.step``:

- analytic (one process, ``policy.ActorCritic`` with a plain Adam: ``analytic_step.unsupported``
  says when not): ``analytic_step.AnalyticStep``, the loss's gradient written out and torch's
  fused Adam, nothing to compile, whatever ``trainer.compile`` says;
- eager (``EagerStep``): ``ppo.minibatch_loss``, backward through Fabric (or Lightning's manual
  optimisation), the global grad-norm clipping, the optimizer's step;
- compiled loss (``trainer.compile`` under DDP or Lightning): the same with the loss (forward and
  backward) through ``torch.compile``;
- fused (``trainer.compile`` on one process where the analytic step does not apply):
  ``fused_step.FusedAdamStep``, the loss, its gradient, the clipping and Adam as one compiled
  graph.

``make_steps`` says on the console (``gpu_envs.engine.first_compile``'s logger) which step each
policy trains with and why.

``ppo.update`` calls it once per minibatch: ``step(minibatch) -> (statistics, grad_norm,
log_ratio)``; ``ppo.learn`` is one iteration's learning of every policy.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch

from gpu_envs.engine import first_compile
from gpu_envs.runs.config import PolicyConfig
from gpu_envs.trainers import analytic_step, fused_step, ppo
from gpu_envs.trainers.rollout import PolicyGroup, RolloutBuffer

Backward = Callable[[torch.Tensor], None]

#: What ``make_steps`` says it compiles (the ``gpu-envs`` commands print it; see
#: ``gpu_envs.engine.first_compile``).
COMPILING = "the gradient step with torch.compile (once per run; trainer.compile=false skips it)"


#: ``torch.optim.Optimizer``'s methods that import torch._dynamo on their first call.
_DYNAMO_DISABLED = ("add_param_group", "state_dict", "load_state_dict", "zero_grad")


@contextlib.contextmanager
def optimizers_without_dynamo():
    """Within: torch's optimizers build, save and load without importing torch._dynamo.

    ``torch.optim.Optimizer.__init__`` (``add_param_group``), ``state_dict``, ``load_state_dict``
    and ``zero_grad`` are wrapped in ``torch._disable_dynamo``, which imports torch._dynamo on the
    first call (1-3 s, the largest import of a one-process run) to build the ``dynamo.disable``
    wrapper it keeps in the function's ``__dynamo_disable``; the wrapper only matters while dynamo
    traces the function. Where torch._dynamo is not imported yet, each function's cached wrapper
    is set to the function itself here, and removed on leaving (torch then builds the real one
    at the next call). The trainers call these methods outside compiled code only (a compiled
    step calls torch's functional Adam)."""
    functions: list[Any] = [
        getattr(torch.optim.Optimizer, name).__wrapped__ for name in _DYNAMO_DISABLED
    ]
    patched = [] if "torch._dynamo" in sys.modules else functions
    patched = [f for f in patched if getattr(f, "__dynamo_disable", None) is None]
    for function in patched:
        function.__dynamo_disable = function
    try:
        yield
    finally:
        for function in patched:
            if getattr(function, "__dynamo_disable", None) is function:
                delattr(function, "__dynamo_disable")


def make_optimizer(
    module: torch.nn.Module, cfg: PolicyConfig, device: torch.device
) -> torch.optim.Adam:
    """The policy's Adam, with torch's fused kernels when it trains on the CPU or CUDA."""
    return torch.optim.Adam(
        module.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=device.type in ("cpu", "cuda")
    )


class EagerStep:
    """One optimizer step of ``group`` on a minibatch: ``loss_fn`` (``ppo.minibatch_loss`` or its
    compiled form), ``backward``, clipping to ``ppo.max_grad_norm``, ``optimizer.step()``."""

    def __init__(
        self,
        group: PolicyGroup,
        backward: Backward,
        nvec,
        loss_fn: Callable = ppo.minibatch_loss,
        kind: str = "eager",
    ):
        self.kind = kind
        self._group, self._backward, self._nvec, self.loss_fn = group, backward, nvec, loss_fn
        self._parameters = [p for p in group.module.parameters() if p.requires_grad]

    def __call__(
        self, minibatch: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Train on ``minibatch``; returns ``(statistics, grad_norm, log_ratio)``."""
        group = self._group
        loss, statistics, log_ratio = self.loss_fn(group.model, minibatch, self._nvec, group.config)
        group.optimizer.zero_grad(set_to_none=True)
        self._backward(loss)
        grad_norm = clip_gradients(self._parameters, ppo.max_grad_norm(group.config))
        group.optimizer.step()
        return statistics, grad_norm, log_ratio

    def compile_for(self, minibatch: dict[str, torch.Tensor]) -> None:
        """Run the loss and its backward on ``minibatch``'s shapes, without an optimizer step."""
        loss, _, _ = self.loss_fn(self._group.model, minibatch, self._nvec, self._group.config)
        self._backward(loss)


def make_step(
    group: PolicyGroup,
    backward: Backward,
    nvec,
    compile_on: RolloutBuffer | None = None,
    fuse: bool = False,
    analytic: bool = False,
) -> Callable | None:
    """``group``'s gradient step: None for a frozen policy; the analytic step when ``analytic``
    (one process) and it applies (``why_not_analytic``); else eager, or with ``compile_on`` (a
    rollout buffer of the run's shapes) compiled now for every minibatch size an update of it
    makes: the fused step when ``fuse`` (one process) and the optimizer is a plain Adam, else the
    compiled loss.

    Compiling moves neither the weights nor the optimizer (the fused step runs on copies; the
    loss's gradients are discarded). If torch cannot compile here (no C++ compiler, say), it warns
    and the policy trains eagerly.
    """
    if group.optimizer is None:
        return None
    optimizer = _unwrapped(group.optimizer)
    if analytic and why_not_analytic(group, one_process=True) is None:
        return analytic_step.AnalyticStep(group.module, optimizer, group.config)
    eager = EagerStep(group, backward, nvec)
    if compile_on is None:
        return eager
    if fuse and fused_step.supports(optimizer):
        step = fused_step.FusedAdamStep(
            group.module, optimizer, ppo.minibatch_loss, nvec, group.config
        )
    else:
        step = EagerStep(group, backward, nvec, torch.compile(ppo.minibatch_loss), "compiled loss")
    try:
        for minibatch in ppo.minibatches_of_each_size(compile_on, group.config):
            step.compile_for(minibatch)
    except Exception as error:
        warnings.warn(
            f"trainer.compile: torch.compile failed for policy {group.tag!r} "
            f"({type(error).__name__}: {error}); it trains without compiling",
            stacklevel=2,
        )
        step = eager
    for parameter in group.module.parameters():
        parameter.grad = None
    return step


def make_steps(
    groups: list[PolicyGroup],
    backward: Backward,
    buffers: dict[str, RolloutBuffer],
    nvec,
    compile: bool,
    fuse: bool = False,
) -> None:
    """Set every policy's ``step`` (``make_step``): on one process (``fuse``) the analytic step
    where it applies; else, with ``compile``, compiled on the shapes of its rollout buffer, saying
    so and the time it took the first time in the process. Says which step each trained policy
    trains with, and why."""
    reasons = {
        group.tag: why_not_analytic(group, one_process=fuse)
        for group in groups
        if group.optimizer is not None
    }
    for tag, reason in reasons.items():
        first_compile.LOGGER.info("gradient step of policy %r: %s", tag, _said(reason, compile))
    compiles = compile and any(reason is not None for reason in reasons.values())
    with first_compile.timed(COMPILING) if compiles else contextlib.nullcontext():
        for group in groups:
            buf = buffers[group.tag] if compile else None
            group.step = make_step(group, backward, nvec, compile_on=buf, fuse=fuse, analytic=fuse)


def why_not_analytic(group: PolicyGroup, one_process: bool) -> str | None:
    """Why ``group`` cannot train with the analytic step; None when it can."""
    if not one_process:
        return "several processes: DDP averages the gradients in the module's own backward"
    assert group.optimizer is not None
    return analytic_step.unsupported(group.module, _unwrapped(group.optimizer))


def _said(reason: str | None, compile: bool) -> str:
    """The console's words for a policy's gradient step (``make_steps``)."""
    if reason is None:
        return "analytic (the loss's gradient written out, torch's fused Adam; nothing to compile)"
    if compile:
        return f"torch.compile, not the analytic step ({reason})"
    return f"eager, not the analytic step ({reason}; trainer.compile=true would compile it)"


def _unwrapped(optimizer) -> torch.optim.Optimizer:
    """The torch optimizer inside Fabric's wrapper (or ``optimizer`` itself)."""
    return getattr(optimizer, "optimizer", optimizer)


def clip_gradients(parameters: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients to a total 2-norm of at most ``max_norm``; return the norm before.

    torch's two foreach calls rather than ``Fabric.clip_gradients``: the trainers run in 32-bit
    precision, where Fabric's version adds per-call overhead only, and under DDP the gradients are
    already averaged after ``backward``.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = torch.nn.utils.get_total_norm(grads, foreach=True)
    if max_norm != float("inf"):
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=True)
    return total_norm
