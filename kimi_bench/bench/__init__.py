"""One module per scenario: ``parity``, ``micro``, ``serve``."""
