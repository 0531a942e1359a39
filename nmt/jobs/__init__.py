"""The commands' jobs, one module per use case: `train` (a config becomes a run), `evaluate`
(a checkpoint becomes a report), `translate` (lines become translations; pairs become scores).

`nmt.cli`, `nmt.study` and tests call these; nothing below imports them.
"""
