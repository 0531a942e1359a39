"""Data: raw corpora (corpus), the built-in generator (synthetic), subwords (tokenizer),
filtering (prepare) and token-budget batches (batching)."""
