"""Named crash points for fault-injection tests.

`MICROINGEST_FAULT=<point>` makes the process that reaches that point kill itself with SIGKILL: no cleanup, no
exception handlers, exactly like an OOM kill or a lost machine. Unset (always, in production) it does nothing.
"""

from __future__ import annotations

import os
import signal

POINTS = ("after_stage",)


def crash_point(name: str) -> None:
    if os.environ.get("MICROINGEST_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
