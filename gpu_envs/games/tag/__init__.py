"""Tag (docs/spec-tag.md): its parameters (``params``), the batched env (``env``), its gymnasium
rows (``gym_vector``), one game for PettingZoo (``pettingzoo``, also ``gpu_envs.tag_v0``) and its
pictures (``rendering``)."""
