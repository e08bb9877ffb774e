"""Autoreset modes (``gymnasium.vector.AutoresetMode``) as the integers every kernel understands."""

NEXT_STEP = 0
SAME_STEP = 1
DISABLED = 2
