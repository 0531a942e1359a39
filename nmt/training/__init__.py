"""Training: the loop (`trainer.Trainer`) and the collaborators that hold each of its jobs: one
optimiser step (`step`), the loss (`loss`), the learning rate (`schedule`), when to stop
(`stopping`, and `stop_agreement` across ranks), random state (`rng`), saving and resuming
(`checkpoints`), what it writes as it goes (`log`, `clock`), torchrun setup (`distributed`) and
fine-tuning (`finetune`). `nmt.jobs.train` is the one use case on top of it."""
