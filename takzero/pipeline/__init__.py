"""The training pipeline: self-play, replay buffer, trainer, gating, Ray actors and the run."""
