"""The package version, in a module of its own so checkpoints can record it without importing the
`nmt` package's lazy API exports (which sit on top of everything)."""

__version__ = "0.1.0"
