"""PPO/A2C trainers on Lightning Fabric for the gpu-envs games.

Where to start reading: ``core`` (``TrainingRun.iterate``: the training loop's body, as CleanRL's
``ppo.py``), which both drivers run: ``fabric_loop`` (``gpu-envs train``: launch, DDP, signals) and
``lightning_module`` (Lightning's ``Trainer``). Then ``ppo`` (GAE, the losses, one policy's update),
``learner`` (each policy's gradient step), ``rollout`` (collection on the device), ``policy`` (the
network) and ``games`` (the game faces). Around them: ``config`` and ``presets``, ``metrics`` and
``console`` (what is logged and printed), ``experiment`` (the LightZero folder), ``checkpoint``
and ``run_control`` (saving, stopping, resuming), ``evaluation``, ``timing`` (the one speed
measure), ``warpdrive`` (only for the original framework's users).

Where to make a change (docs/architecture.md has the diagram): a game: ``kernels/<game>_logic.py``,
``gpu_envs/<game>.py``, one record in ``gpu_envs/games.py``; the PPO loss: ``ppo.py``; a CLI flag:
``gpu_envs/commands/train.py`` (and the field in ``config.py``).

``load_policy(path)``: ``policy(obs, env) -> actions`` playing every Tag team with its trained
policy of a trainer checkpoint (``gpu_envs.trainers.matchups``).
"""

from gpu_envs.trainers.matchups import load_policy

__all__ = ["load_policy"]
