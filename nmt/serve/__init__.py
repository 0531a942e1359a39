"""`nmt serve`: the HTTP server (app.py), cross-request batching (batcher.py) and the page
(static/). Needs the `serve` extra (FastAPI, uvicorn); nothing else in nmt imports this package."""
