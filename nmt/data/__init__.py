"""Data: raw corpora (corpus), the built-in generator (synthetic), subwords (tokenizer), the
prepared memory-mapped training corpus (prepared, ragged) and token-budget batches (batching)."""
