"""The envs behind other libraries' interfaces, one module each: ``sb3`` (stable-baselines3),
``torchrl`` and ``torchrl_joint_actions`` (TorchRL), ``benchmarl``, ``supersuit``, ``rsl_rl``,
``skrl`` and ``rl_games`` (over ``same_step``, what the torch-batched trainers share), and
``wrappers`` (torch-native vector-env wrappers). Each library is an optional extra; importing this
package imports none of them."""
