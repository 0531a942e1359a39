"""Exporters: turn an nmt checkpoint into another engine's model format (they sit beside the CLI)."""
