"""PPO/A2C trainers on Lightning Fabric for the gpu-envs games: the learning, read top to bottom.

Where to start reading: ``core`` (``TrainingRun.iterate``: the training loop's body, as CleanRL's
``ppo.py``), which both drivers run: ``fabric_loop`` (``gpu-envs train``: launch, DDP, signals) and
``gpu_envs.lightning.module`` (Lightning's ``Trainer``). Then ``ppo`` (GAE, the losses, and
``learn``: one iteration's learning of every policy), ``learner`` (each policy's gradient step:
``analytic_step`` on one process, else ``fused_step`` compiles it), ``rollout`` (collection on the
device; ``cuda_graph_rollout`` captures it), ``statistics`` (the device-side metrics window),
``policy`` (the network), ``sampling`` (the action samplers), ``opponents`` (self-play pools),
``game_faces`` (how the trainer sees each game), ``evaluation`` (greedy episodes), ``scores``
(scoring a saved checkpoint) and ``matchups`` (Tag cross-play; ``load_policy(path)`` plays every Tag
team with its trained policy).

Around the learning, one layer below in ``gpu_envs.runs``: the config and presets, the metric
records, console and speed measure, the LightZero folder, checkpoints, status and resume, curves.

Where to make a change (docs/architecture.md has the map): a game: ``kernels/<game>_logic.py``,
``gpu_envs/games/<game>.py``, one record in ``gpu_envs/games/__init__.py``; the PPO loss:
``ppo.py``; a CLI flag: ``gpu_envs/commands/train.py`` (and the field in
``gpu_envs/runs/config.py``).
"""
