"""The one exception type for user mistakes.

`cli.main` catches it and prints `nmt: error: <message>` on one line with exit code 2;
anything else is a bug and keeps its traceback.
"""


class NmtError(Exception):
    """A user-facing error: bad config, bad data, unusable checkpoint."""
