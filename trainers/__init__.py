"""PPO/A2C trainers on Lightning Fabric for the gpu-envs games.

Where to start reading: ``fabric_loop`` (the training loop, as CleanRL's ``ppo.py``), ``ppo`` (GAE,
the losses and one policy's update), ``learner`` (each policy's gradient step and one iteration's
learning, shared with ``lightning_module``, the same training under Lightning's ``Trainer``), then
``rollout`` (collection on the device), ``policy`` and ``games``. Around them: ``metrics`` and
``console`` (what is logged and printed), ``experiment`` (the LightZero folder), ``checkpoint``,
``evaluation``, ``matchups``, ``sampling``, ``fused_step`` and ``timing``.

``load_policy(path)``: ``policy(obs, env) -> actions`` playing every Tag team with its trained
policy of a trainer checkpoint (``gpu_envs.trainers.matchups``).
"""

from gpu_envs.trainers.matchups import load_policy

__all__ = ["load_policy"]
