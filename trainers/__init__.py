"""PPO/A2C trainers on Lightning Fabric for the gpu-envs games: the learning, read top to bottom.

Where to start reading: ``core`` (``TrainingRun.iterate``: the training loop's body, as CleanRL's
``ppo.py``), which both drivers run: ``fabric_loop`` (``gpu-envs train``: launch, DDP, signals)
and ``gpu_envs.lightning.module`` (Lightning's ``Trainer``). Then ``ppo`` (GAE, the losses, one
policy's update), ``learner`` (each policy's gradient step; ``fused_step`` compiles it),
``rollout`` (collection on the device; ``cuda_graph_rollout`` captures it), ``policy`` (the
network), ``sampling`` (the action samplers), ``opponents`` (self-play pools), ``games`` (the
game faces) and ``evaluation`` (greedy episodes).

Around the learning, in ``gpu_envs.runs``: the config and presets, the metrics, console and speed
measure, the LightZero folder, checkpoints, status and resume, curves and Tag cross-play.

Where to make a change (docs/architecture.md has the diagram): a game: ``kernels/<game>_logic.py``,
``gpu_envs/<game>.py``, one record in ``gpu_envs/games.py``; the PPO loss: ``ppo.py``; a CLI flag:
``gpu_envs/commands/train.py`` (and the field in ``gpu_envs/runs/config.py``).

``load_policy(path)``: ``policy(obs, env) -> actions`` playing every Tag team with its trained
policy of a trainer checkpoint (``gpu_envs.runs.matchups``).
"""

from gpu_envs.runs.matchups import load_policy

__all__ = ["load_policy"]
