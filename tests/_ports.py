"""One free TCP port on 127.0.0.1 for a process a test starts: :func:`free_port`."""

from __future__ import annotations

import random
import socket

# The port goes to another process, which binds it a moment later. A port from the kernel's ephemeral range
# (32768-60999 on Linux; what binding port 0 gives) can be taken in between by any outgoing connection, and
# Ray's workers draw theirs from 10002-19999, so the port comes from the range between them.
LOW, HIGH = 20000, 32000


def free_port() -> int:
    """A port no process on 127.0.0.1 holds now, outside the ephemeral range and Ray's worker ports."""
    draw = random.SystemRandom()
    while True:
        port = draw.randrange(LOW, HIGH)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
