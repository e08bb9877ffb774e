"""The seed run config's Tag parameters: plain data, importable without torch or numba (the
``gpu-envs train`` parser reads the presets before anything heavy is imported)."""

from __future__ import annotations


def seed_config() -> dict[str, object]:
    """The ``env`` section of the seed run config (the WarpDrive Tag notebook's, verbatim).

    5 taggers chase 100 runners on a 20 x 20 grid; each agent observes its 10 nearest. The bundled
    ``tag`` training preset, the Tag benchmarks and ``gpu-envs device-check`` all use it.
    """
    return dict(
        num_taggers=5,
        num_runners=100,
        grid_length=20.0,
        episode_length=200,
        max_acceleration=0.1,
        min_acceleration=-0.1,
        max_turn=2.35,
        min_turn=-2.35,
        num_acceleration_levels=10,
        num_turn_levels=10,
        skill_level_tagger=1.0,
        skill_level_runner=1.0,
        use_full_observation=False,
        runner_exits_game_after_tagged=True,
        num_other_agents_observed=10,
        tag_reward_for_tagger=10.0,
        tag_penalty_for_runner=-10.0,
        end_of_game_reward_for_runner=1.0,
        tagging_distance=0.02,
    )
