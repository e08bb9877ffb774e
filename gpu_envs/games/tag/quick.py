"""Quick Tag: a small Tag configuration whose taggers visibly learn within the budgets of MARL
libraries' own examples (RLlib PPO ~20k env steps, AgileRL IPPO ~24k, TorchRL's MARL tutorial
~30k), measured against random taggers as ``gpu-envs evaluate tag`` does (docs/tag-quick.md).

Plain data, importable without torch or numba: ``gpu_envs.tag_v0.parallel_env(**QUICK_TAG)``,
``gym.make_vec("gpu_envs/Tag-v0", num_envs, **QUICK_TAG)``, ``TagEnv(num_envs, **QUICK_TAG)``; the
``tag-quick`` training preset plays it. Trained taggers tag 1.56-1.71x as many random runners per
episode as random taggers after 24k env steps of ``gpu-envs train tag-quick`` (seeds 1-3), and
1.27-1.59x after 20k env steps of RLlib's PPO (docs/examples/clients/rllib/ippo_tag.py, seeds 0-3).
"""

from __future__ import annotations

from typing import Any

#: 2 taggers chase 12 runners (many targets: a tagger that steers meets one often) on a 10 x 10
#: grid for 25 steps; a runner is tagged within 1.0 (tagging_distance 0.1 of L), one step at top
#: speed. Each agent picks speed up / down / keep and turn left / right / straight by a quarter
#: turn (3 x 3 actions), and sees its 3 nearest agents and itself (its heading is what steering
#: needs).
QUICK_TAG: dict[str, Any] = dict(
    num_taggers=2,
    num_runners=12,
    grid_length=10.0,
    episode_length=25,
    tagging_distance=0.1,
    num_acceleration_levels=2,
    num_turn_levels=2,
    use_full_observation=False,
    num_other_agents_observed=3,
    observe_self=True,
)
