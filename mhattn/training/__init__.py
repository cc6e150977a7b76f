"""Training: tasks, the loop, and checkpoints."""
