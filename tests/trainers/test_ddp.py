"""Two DDP processes on the CPU (gloo), compiled losses: identical weights after updates, different
env seeds, and episode counts summed over the ranks.

The test runs this file as a script; Fabric's launcher starts the second rank by running it again.
"""

import csv
import subprocess
import sys
from pathlib import Path

import torch

from gpu_envs.runs.checkpoint import load_checkpoint

OVERRIDES = [
    "env.max_episode_steps=5",  # every env's episodes end at steps 4 and 10 of its 16
    "trainer.num_envs=4",
    "trainer.train_batch_size=32",
    "trainer.total_timesteps=128",
    "trainer.accelerator=cpu",
    "trainer.devices=2",
    "trainer.strategy=ddp",
    "trainer.seed=7",
    "trainer.progress_bar=false",
    "policy.agent.model.fc_dims=[8]",
    "evaluation.eval_freq=1",
    "saving.metrics_log_freq=1",
    "trainer.compile=true",
    "saving.tag=example",  # a fixed folder name (the presets' is the start time)
]


def test_two_ranks_hold_identical_weights_with_different_env_seeds(tmp_path):
    done = subprocess.run(
        [sys.executable, __file__, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert ranks[0]["iterations"] == ranks[1]["iterations"] == 2
    assert ranks[0]["compiled"] and ranks[1]["compiled"]  # trainer.compile under DDP
    for key, value in ranks[0]["weights"].items():
        assert torch.equal(value, ranks[1]["weights"][key]), key
    assert not torch.equal(ranks[0]["initial"], ranks[0]["weights"]["actor.weight"])  # it trained
    assert not torch.equal(ranks[0]["obs"], ranks[1]["obs"])
    assert ranks[0]["first_obs"].shape == (4, 4)
    assert not torch.equal(ranks[0]["first_obs"], ranks[1]["first_obs"])
    # rank r's envs were seeded with seed + r * num_envs + i:
    # rank 1's env 0 starts like env 4 of seed 7
    from gpu_envs.games.cartpole import CartPoleVectorEnv

    reference, _ = CartPoleVectorEnv(8).reset(seed=7)
    torch.testing.assert_close(ranks[0]["first_obs"], reference[:4])
    torch.testing.assert_close(ranks[1]["first_obs"], reference[4:])
    experiments = list((tmp_path / "exp" / "cartpole_ppo").iterdir())
    assert [p.name for p in experiments] == ["example"]  # only rank 0 wrote
    # Each rank ended 4 envs x 2 episodes; the counters and logs hold both ranks' episodes.
    assert ranks[0]["episodes"] == ranks[1]["episodes"] == 8
    root = experiments[0]
    state = load_checkpoint(root / "ckpt" / "iteration_2.pth.tar")
    assert state["counters"]["total_episodes"] == 16 and state["env_step"] == 2 * 2 * 32
    collector_log = (root / "log" / "collector" / "collector_logger.txt").read_text()
    assert "total_episode_count: 8\n" in collector_log  # after iteration 1
    assert "total_episode_count: 16\n" in collector_log  # after iteration 2
    with open(root / "log" / "csv" / "version_0" / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    lengths = [row["charts/episodic_length"] for row in rows if row["charts/episodic_length"]]
    assert [float(length) for length in lengths] == [5.0, 5.0]


def _main(out: Path) -> None:
    from gpu_envs.runs.config import RunConfig, apply_overrides
    from gpu_envs.runs.presets import preset
    from gpu_envs.trainers.fabric_loop import Trainer, make_fabric

    config = RunConfig.from_dict(
        apply_overrides(preset("cartpole"), OVERRIDES + [f"saving.basedir={out / 'exp'}"])
    )
    fabric = make_fabric(config)
    trainer = Trainer(fabric, config)
    initial = trainer.groups[0].module.actor.weight.detach().clone()
    first_obs = trainer.game.reset(
        config.trainer.seed + fabric.global_rank * config.trainer.num_envs
    )[:, 0]
    summary = trainer.fit()
    torch.save(
        {
            "iterations": summary["iterations"],
            "weights": trainer.groups[0].module.state_dict(),
            "initial": initial,
            "first_obs": first_obs,
            "compiled": trainer.groups[0].step.kind == "compiled loss",
            "episodes": int(trainer.episodes),
            "obs": trainer.collector.buffers["agent"].obs.clone(),
        },
        out / f"rank{fabric.global_rank}.pt",
    )


if __name__ == "__main__":
    _main(Path(sys.argv[1]))
