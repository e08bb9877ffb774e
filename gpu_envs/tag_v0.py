"""Tag in PettingZoo's module convention (``pettingzoo.mpe.simple_tag_v3`` is imported the same
way): ``from gpu_envs import tag_v0; tag_v0.parallel_env()``. The environment itself is
:mod:`gpu_envs.games.tag.pettingzoo`."""

from gpu_envs.games.tag.pettingzoo import TagParallelEnv, env, parallel_env, raw_env, vector_env

__all__ = ["TagParallelEnv", "env", "parallel_env", "raw_env", "vector_env"]
