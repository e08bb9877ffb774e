"""Subcommands of the ``gpu-envs`` command line (see ``gpu_envs.cli``)."""
