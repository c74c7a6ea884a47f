"""The one error every peer reader raises."""

from __future__ import annotations


class PeerFormatError(ValueError):
    """A peer's result file that cannot be imported (the CLI's exit 2)."""
