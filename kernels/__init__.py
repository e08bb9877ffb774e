"""Step logic of the gpu-envs environments, written once and compiled for the CPU and CUDA.

Installed as ``gpu_envs.kernels``. Nothing here imports torch: the kernels take arrays (NumPy
arrays on the CPU, CUDA device arrays on the GPU) and write their results in place.
"""
