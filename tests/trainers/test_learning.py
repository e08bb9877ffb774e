"""Learning, proven: the bundled CartPole preset reaches a greedy 475 (CartPole-v1's threshold).

One seeded run of the preset as users get it, with the gradient step eager (the compiled step
only saves time here, and costs its compiling); the budget is the preset's own 100k env steps.
"""

import pytest

from gpu_envs.runs.config import RunConfig, apply_overrides
from gpu_envs.runs.presets import preset


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cartpole_preset_reaches_a_greedy_475(tmp_path):
    from gpu_envs.trainers.fabric_loop import train

    config = RunConfig.from_dict(
        apply_overrides(
            preset("cartpole"),
            [
                f"saving.basedir={tmp_path}",
                "trainer.compile=false",
                "trainer.progress_bar=false",
                "saving.metrics_log_freq=1000",
            ],
        )
    )
    assert config.evaluation.stop_value == 475.0 and config.trainer.total_timesteps == 100_000
    summary = train(config)
    assert summary["best_eval"] >= 475.0, summary
    assert summary["env_steps"] < 100_000  # stopped by the evaluation, inside the budget
