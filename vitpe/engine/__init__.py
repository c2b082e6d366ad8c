"""Training machinery: building a run from its config, the epoch loop, checkpoints, distributed set-up."""
