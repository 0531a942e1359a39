"""`nmt serve`: the HTTP server (app.py), cross-request batching (batcher.py) and the page
(static/). Needs the `serve` extra (FastAPI, uvicorn); nothing else in nmt imports this package
but `nmt serve`'s command (this module only, for its defaults, before the extra is checked)."""

# Constraint phrases in all of a request's texts (422 beyond): the worst request within every
# default limit (this many phrases at the largest beam) stays well under the default --timeout
# on a model the size of configs/multi30k/de-en/transformer_local.yaml (docs/serving.md).
REQUEST_PHRASES = 64
