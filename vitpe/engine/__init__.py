"""The training run: the epoch loop and evaluation, the optimiser and schedule, the metrics file, the run folder's
lock, preemption by signals, distributed set-up and the CPU allocator's settings."""
