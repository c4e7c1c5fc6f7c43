"""Where an envelope is: the states of `lifecycle.Envelope`, each waiting for one kind of event.

Apart from the machine so that both of its halves name them, `lifecycle.py` (prepared,
launched, run, driven by events) and `fencing.py` (the way out of any state), and so does
the zygote, which counts the envelopes still starting.
"""

from __future__ import annotations

import enum

__all__ = ["State"]


class State(enum.Enum):
    """Where an envelope is; each waits for one kind of event."""

    UNSHARING = "unsharing"  # pid 1 cloned; waiting for "unshared"
    BUILDING = "building"  # id maps written; waiting for "prepared"
    PREPARED = "prepared"  # waiting for a launch
    STAGED = "staged"  # go sent; waiting for "ready" (after the server's gate)
    RUNNING = "running"  # waiting for the candidate's end, a cancel or the deadline
    SETTLING = "settling"  # the candidate ended; waiting for pid 1's own exit
    FENCING = "fencing"  # killed; waiting for pid 1 to be gone (its report of the end counts)
    DONE = "done"
