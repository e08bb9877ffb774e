"""The Lightning notebook's cells, copied as closely as the port allows, run end to end on the CPU
at tiny sizes: WarpDrive's defaults for the keys the run config leaves out, the callbacks with the
notebook's arguments, the ``saving`` section honoured, the animations before and after training."""

import json
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch import Trainer

from gpu_envs import TagEnv
from gpu_envs.games.tag.replay import render_episode
from gpu_envs.lightning.module import EnvResetCallback, TagLightningModule
from gpu_envs.lightning.warpdrive import CUDACallback, PerfStatsCallback
from gpu_envs.runs import console
from gpu_envs.runs.config import RunConfig, load_yaml
from gpu_envs.runs.console import NO_EPISODE
from gpu_envs.trainers.matchups import load_policy
from tests.helpers.seed_run_config import small_seed_run_config

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial-tag-lightning.md"


def _blocks(text: str) -> dict[str, dict[str, str]]:
    """The printed blocks of ``text``: title -> {name: value}, the last block of each title."""
    blocks: dict[str, dict[str, str]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line == console.RULE and i + 2 < len(lines) and lines[i + 2] == console.RULE:
            block = blocks[lines[i + 1]] = {}
            for row in lines[i + 3 :]:
                name, sep, value = row.partition(": ")
                if not sep or len(name) != 40:
                    break
                block[name.rstrip()] = value.strip()
    return blocks


def _quiet_trainer(tmp_path, callbacks, max_epochs) -> Trainer:
    return Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=callbacks,
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )


def test_the_notebooks_cells_run_end_to_end(tmp_path, capsys):
    run_config = small_seed_run_config(tmp_path)

    # [6] the env on the device, the agent map, the module.
    env = TagEnv(num_envs=run_config["trainer"]["num_envs"], device="cpu", **run_config["env"])
    policy_tag_to_agent_id_map = {
        "tagger": list(env.taggers),
        "runner": list(env.runners),
    }
    wd_module = TagLightningModule(
        env=env,
        config=run_config,
        policy_tag_to_agent_id_map=policy_tag_to_agent_id_map,
        verbose=True,
    )
    resolved = wd_module.run_config
    assert resolved.defaults == "warpdrive"
    runner = resolved.policy["runner"]
    assert (runner.vf_loss_coeff, runner.entropy_coeff) == (0.01, 0.05)
    assert (runner.anneal_lr, runner.normalize_advantage, runner.gae_lambda) == (False, False, 1.0)

    # [7] an episode before training.
    before = wd_module.animate(tmp_path / "before.gif", fps=25)
    assert (tmp_path / "before.gif").stat().st_size > 0 and len(before) >= 2

    # [8] the callbacks and the Trainer, with the notebook's arguments.
    log_freq = run_config["saving"]["metrics_log_freq"]
    cuda_callback = CUDACallback(module=wd_module)
    perf_stats_callback = PerfStatsCallback(
        batch_size=wd_module.training_batch_size,
        num_iters=wd_module.num_iters,
        log_freq=log_freq,
    )
    num_gpus = 1
    num_episodes = run_config["trainer"]["num_episodes"]
    episode_length = run_config["env"]["episode_length"]
    training_batch_size = run_config["trainer"]["train_batch_size"]
    num_epochs = num_episodes * episode_length / training_batch_size
    assert num_epochs == wd_module.num_iters == 4
    trainer = Trainer(
        accelerator="cpu",
        devices=num_gpus,
        callbacks=[cuda_callback, perf_stats_callback],
        max_epochs=num_epochs,
        log_every_n_steps=1,
        reload_dataloaders_every_n_epochs=1,
        default_root_dir=tmp_path,
        enable_progress_bar=False,
    )

    # [10] train.
    trainer.fit(wd_module)
    out = capsys.readouterr().out
    assert out.count("Metrics for policy 'runner'") == 2 and out.count("Speed performance") == 2
    assert "VF loss coefficient                     :    0.01000" in out
    assert "Entropy coefficient                     :    0.05000" in out
    assert "Iteration                               :      4 / 4" in out
    assert "Training is complete!" in out
    # A constant learning rate, as WarpDrive's without a schedule.
    assert float(trainer.callback_metrics["runner/Learning rate"]) == pytest.approx(0.005)
    assert float(trainer.callback_metrics["tagger/Learning rate"]) == pytest.approx(0.002)

    # The tutorial's sample output has the blocks and lines a run prints, in their order.
    sample = TUTORIAL.read_text().split("This is the whole output")[1].split("```text")[1]
    sample = sample.split("```")[0]
    printed, documented = _blocks(out), _blocks(sample)
    assert list(documented) == list(printed)
    for title, block in printed.items():
        assert list(documented[title]) == list(block), title
    for tag, lr in (("runner", "0.00500"), ("tagger", "0.00200")):
        shown = documented[f"Metrics for policy '{tag}'"]
        assert (shown["VF loss coefficient"], shown["Entropy coefficient"]) == (
            "0.01000",
            "0.05000",
        )
        assert shown["Learning rate"] == lr and "nan" not in shown.values()
        assert shown["Mean (norm.) advantages"] == shown["Mean advantages"]

    # The saving section: basedir/name/tag, as the Fabric trainer lays it out.
    root = tmp_path / "continuous_tag" / "example"
    assert f"Saving the experiment to the folder '{root}'" in out
    assert RunConfig.from_dict(load_yaml(root / "total_config.yaml")) == resolved
    lines = [json.loads(line) for line in (root / "results.json").read_text().splitlines()]
    assert [line["Iterations Completed"] for line in lines] == [2, 4]  # metrics_log_freq
    assert set(lines[-1]) == {"Iterations Completed", "runner", "tagger", "Perf. Stats"}
    assert lines[-1]["runner"]["VF loss coefficient"] == 0.01
    for tag in ("runner", "tagger"):  # advantages are not normalised (WarpDrive's default)
        block = lines[-1][tag]
        assert block["Mean (norm.) advantages"] == block["Mean advantages"] != 0.0
    assert sorted(p.name for p in (root / "ckpt").iterdir()) == [
        "ckpt_best.pth.tar",  # the core's evaluation, as under gpu-envs train
        "iteration_3.pth.tar",  # model_params_save_freq
        "iteration_4.pth.tar",  # the last iteration
    ]
    assert f"Saving the checkpoint to the file '{root / 'ckpt' / 'iteration_4.pth.tar'}'" in out
    assert "Policy 'runner' network" in (root / "log/learner/learner_logger.txt").read_text()
    assert any((root / "log/serial").glob("events.out.tfevents.*"))
    assert json.loads((root / "run_status.json").read_text())["status"] == "finished"
    assert "charts/SPS" in (root / "log/csv/version_0/metrics.csv").read_text()

    # The last checkpoint holds the trained weights, and the CLI's loader plays them.
    policy = load_policy(root / "ckpt" / "iteration_4.pth.tar")
    for tag, network in policy.networks.items():
        trained = wd_module.policies[tag].state_dict()
        assert all(torch.equal(v, trained[k]) for k, v in network.state_dict().items())
    assert len(render_episode(policy.env_params, policy=policy, steps=3)) == 4

    # [11] an episode after training; [12] close.
    after = wd_module.animate(tmp_path / "after.gif", fps=25)
    assert len(after) >= 2
    wd_module.graceful_close()
    assert "Trainer exits gracefully" in capsys.readouterr().out


def test_a_window_without_an_ended_episode_says_so(tmp_path, capsys):
    # 5 steps per rollout of 10-step games, no tags: iteration 1 ends no episode, iteration 2 does.
    run_config = small_seed_run_config(tmp_path)
    run_config["env"]["tagging_distance"] = 0.001
    run_config["trainer"].update(train_batch_size=10, num_episodes=2)
    run_config["saving"].update(metrics_log_freq=1)
    env = TagEnv(num_envs=2, device="cpu", **run_config["env"])
    module = TagLightningModule(env=env, config=run_config)
    _quiet_trainer(tmp_path, [EnvResetCallback()], module.num_iters).fit(module)
    blocks = capsys.readouterr().out.split("Metrics for policy 'runner'")[1:]
    assert len(blocks) == 2
    assert f"Mean episodic reward                    : {NO_EPISODE}" in blocks[0]
    assert "nan" not in blocks[0]
    assert NO_EPISODE not in blocks[1]
    results = (tmp_path / "continuous_tag" / "example" / "results.json").read_text().splitlines()
    first, second = (json.loads(line)["runner"]["Mean episodic reward"] for line in results)
    assert first is None and isinstance(second, float)
    module.close()


def test_the_callbacks_check_the_notebooks_arguments_against_the_module(tmp_path):
    run_config = small_seed_run_config(tmp_path)
    env = TagEnv(num_envs=2, device="cpu", **run_config["env"])
    module = TagLightningModule(env=env, config=run_config, verbose=False)
    other = TagLightningModule(
        env=TagEnv(num_envs=2, device="cpu", **run_config["env"]), config=run_config, verbose=False
    )
    wrong = PerfStatsCallback(batch_size=module.training_batch_size + 2, num_iters=module.num_iters)
    with pytest.raises(
        ValueError, match=r"PerfStatsCallback\(batch_size=22\) but the module has 20"
    ):
        _quiet_trainer(tmp_path, [CUDACallback(module=module), wrong], 1).fit(module)
    wrong = PerfStatsCallback(num_iters=module.num_iters + 1)
    with pytest.raises(ValueError, match=r"PerfStatsCallback\(num_iters=5\) but the module has 4"):
        _quiet_trainer(tmp_path, [CUDACallback(module=module), wrong], 1).fit(module)
    with pytest.raises(ValueError, match="another module than the one the Trainer fits"):
        _quiet_trainer(tmp_path, [CUDACallback(module=other)], 1).fit(module)
    assert CUDACallback is EnvResetCallback
    module.close()
    other.close()


def test_an_animation_is_repeatable_and_leaves_trainings_random_state_alone(tmp_path):
    run_config = small_seed_run_config(tmp_path)
    env = TagEnv(num_envs=2, device="cpu", **run_config["env"])
    # Policies for scattered agents index the agent axis with a tensor.
    agent_map = {"tagger": [0, 3], "runner": [1, 2, 4, 5, 6]}
    module = TagLightningModule(
        env=env, config=run_config, policy_tag_to_agent_id_map=agent_map, verbose=False
    )
    state = torch.get_rng_state()
    first = module.fetch_episode_states(seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    again = module.fetch_episode_states(seed=3)
    assert (first["actions"] == again["actions"]).all() and (first["x"] == again["x"]).all()
    greedy = module.fetch_episode_states(seed=3, greedy=True)
    torch.manual_seed(123)
    assert (greedy["actions"] == module.fetch_episode_states(seed=3, greedy=True)["actions"]).all()
    frames = module.animate(fps=25, seed=3)
    assert len(frames) == len(first["t"])
    module.close()


def test_the_resolved_notebook_config_prints_as_yaml_with_its_defaults(tmp_path):
    module = TagLightningModule(
        env=TagEnv(num_envs=2, device="cpu", **small_seed_run_config(tmp_path)["env"]),
        config=small_seed_run_config(tmp_path, seed=7),
        verbose=False,
    )
    data = yaml.safe_load(yaml.safe_dump(module.run_config.to_dict()))
    assert data["defaults"] == "warpdrive" and data["trainer"]["seed"] == 7
    assert data["policy"]["tagger"]["model"]["activation"] == "relu"
    module.close()


def test_the_fabric_trainer_reads_the_notebooks_dict_with_warpdrives_defaults(tmp_path):
    from gpu_envs.trainers.fabric_loop import train

    run_config = small_seed_run_config(tmp_path, accelerator="cpu", progress_bar=False)
    run_config["evaluation"] = dict(eval_freq=0)
    summary = train(RunConfig.from_dict({**run_config, "defaults": "warpdrive"}))
    root = tmp_path / "continuous_tag" / "example"
    assert summary["iterations"] == 4 and summary["experiment"] == str(root)
    last = json.loads((root / "results.json").read_text().splitlines()[-1])
    assert (last["tagger"]["VF loss coefficient"], last["tagger"]["Entropy coefficient"]) == (
        0.01,
        0.05,
    )
    assert last["tagger"]["Learning rate"] == pytest.approx(0.002)
