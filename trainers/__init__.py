"""PPO/A2C trainers on Lightning Fabric for the gpu-envs games.

``load_policy(path)``: ``policy(obs, env) -> actions`` playing every Tag team with its trained
policy of a trainer checkpoint (``gpu_envs.trainers.matchups``).
"""

from gpu_envs.trainers.matchups import load_policy

__all__ = ["load_policy"]
