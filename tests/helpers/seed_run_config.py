"""The run config of the WarpDrive Tag notebook users bring (its cell [5]), verbatim, shared by
the tests that feed it to the trainers; ``small_seed_run_config`` is it at tiny sizes."""

import copy

SEED_RUN_CONFIG = dict(
    name="tag_continuous",
    env=dict(
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
    ),
    trainer=dict(num_envs=50, train_batch_size=10000, num_episodes=500),
    policy=dict(
        runner=dict(
            to_train=True,
            algorithm="A2C",
            gamma=0.98,
            lr=0.005,
            model=dict(type="fully_connected", fc_dims=[256, 256], model_ckpt_filepath=""),
        ),
        tagger=dict(
            to_train=True,
            algorithm="A2C",
            gamma=0.98,
            lr=0.002,
            model=dict(type="fully_connected", fc_dims=[256, 256], model_ckpt_filepath=""),
        ),
    ),
    saving=dict(
        metrics_log_freq=10,
        model_params_save_freq=5000,
        basedir="/tmp",
        name="continuous_tag",
        tag="example",
    ),
)


def small_seed_run_config(basedir, **trainer) -> dict:
    """The notebook's config at tiny sizes: 2 taggers and 5 runners, 2 games of 10 steps, a rollout
    of 10 steps per game, 16-unit policies; 4 iterations, printed every 2, saved every 3."""
    config = copy.deepcopy(SEED_RUN_CONFIG)
    config["env"].update(
        num_taggers=2,
        num_runners=5,
        grid_length=2.0,
        episode_length=10,
        num_other_agents_observed=3,
    )
    config["trainer"] = dict(num_envs=2, train_batch_size=20, num_episodes=8, **trainer)
    for policy in config["policy"].values():
        policy["model"]["fc_dims"] = [16, 16]
    config["saving"].update(metrics_log_freq=2, model_params_save_freq=3, basedir=str(basedir))
    return config
