"""Worker processes that do not outlive the process that started them.

``kill -9`` of ``worked quiz`` or ``worked serve`` gives its workers no chance to be told: without this they
stay alive (ppid 1) holding their memory. Each worker asks Linux to send it SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), then checks that the parent has not died already, in the moment between
the fork and the call. Elsewhere (no prctl) it does nothing: the pools' own shutdown still applies.
"""
from __future__ import annotations

import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None) -> None:
    """Initializer for a pool's workers: SIGKILL this process when its parent exits."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)     # the parent died before prctl took effect
