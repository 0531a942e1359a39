"""Scoring translations against references: the metrics and their bootstrap intervals
(`metrics`, `bootstrap`, `comet`), then what is made of the scores (`report`, `compare`,
`curves`)."""
