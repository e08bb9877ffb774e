"""Tools that work on any gpu-envs env: :mod:`gpu_envs.utils.parity` (backend parity checks)."""
