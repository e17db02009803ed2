"""A WeasyPrint process started early, so its import overlaps with solving and drawing formulas.

``worked sheet`` spends about half a second importing WeasyPrint and as long again on sympy and
the solve. :class:`LayoutServer` forks at the start of the command, before sympy is imported; the
child imports WeasyPrint and warms it up while the parent reads the problem, solves it and draws
the formulas, then lays out each HTML document it is sent and sends back the PDF bytes. The parent
never imports WeasyPrint. ``write_sheet`` starts one itself when it is not given one (later, but
the import still overlaps with drawing the formulas). The PDFs are the same bytes as :func:`worked.render.pdf.html_to_pdf`
makes in one process (``tests/test_sheet_pdf.py`` compares them).

Two workers share one import: the first forks the second once WeasyPrint is warm, and the parent
sends them the worksheet and the key in turn. Messages are length-prefixed pickles over a pair of
pipes per worker; the parent writes and reads them on helper threads (started after the fork), so
no process ever waits on a full pipe.
"""
from __future__ import annotations

import os
import pickle
import queue
import signal
import struct
import threading

from ..errors import WorkedError


def _write_msg(fh, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(struct.pack("<Q", len(data)))
    fh.write(data)
    fh.flush()


def _read_msg(fh):
    head = fh.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    data = fh.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def _serve_one(requests_fd: int, replies_fd: int) -> None:
    """Turn each (name, html, paper) read from *requests_fd* into a PDF, until end of file."""
    from . import pdf as P
    from .sheet import outcome

    with os.fdopen(requests_fd, "rb") as rin, os.fdopen(replies_fd, "wb") as rout:
        while True:
            msg = _read_msg(rin)
            if msg is None:
                return
            name, html, paper = msg
            _write_msg(rout, (name, *outcome(lambda: P.html_to_pdf(html, paper=paper))))


def _serve(channels: list[tuple[int, int]]) -> None:
    """The child: import and warm up WeasyPrint once, fork a sibling per extra channel, serve channel 0."""
    from . import pdf as P
    from .sheet import fork_child

    P.warm_up_weasyprint()
    siblings = []
    for k, (req, rep) in enumerate(channels[1:], start=1):
        others = [fd for j, ch in enumerate(channels) if j != k for fd in ch]
        siblings.append(fork_child(lambda req=req, rep=rep: _serve_one(req, rep), close=others))
    for req, rep in channels[1:]:
        os.close(req)
        os.close(rep)
    _serve_one(*channels[0])
    for pid in siblings:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


class LayoutServer:
    """Forked WeasyPrint workers; :meth:`submit` documents, :meth:`result` their PDF bytes.

    With ``workers=2`` the first worker forks the second once WeasyPrint is imported and warm, so
    both lay out at once (a worksheet and its key) for the price of one import.
    """

    def __init__(self, workers: int = 2):
        from .sheet import fork_child

        pipes = [(os.pipe(), os.pipe()) for _ in range(max(1, workers))]   # (requests, replies) each
        child_ends = [(req[0], rep[1]) for req, rep in pipes]
        parent_ends = [(req[1], rep[0]) for req, rep in pipes]
        self.pid = fork_child(lambda: _serve(child_ends), close=[fd for ends in parent_ends for fd in ends])
        for fds in child_ends:
            for fd in fds:
                os.close(fd)
        self._cond = threading.Condition()
        self._replies: dict[str, tuple[bool, object]] = {}
        self._sent: dict[str, int] = {}
        self._dead: set[int] = set()
        self._queues = []
        self._threads = []
        for k, (w, r) in enumerate(parent_ends):
            q = queue.Queue()
            self._queues.append(q)
            self._threads += [threading.Thread(target=self._write_loop, args=(q, os.fdopen(w, "wb")), daemon=True),
                              threading.Thread(target=self._read_loop, args=(k, os.fdopen(r, "rb")), daemon=True)]
        for t in self._threads:
            t.start()
        self._next = 0

    @staticmethod
    def _write_loop(q, fh) -> None:
        try:
            with fh:
                while True:
                    msg = q.get()
                    if msg is None:
                        return
                    _write_msg(fh, msg)
        except OSError:
            pass

    def _read_loop(self, k, fh) -> None:
        with fh:
            while True:
                msg = _read_msg(fh)
                with self._cond:
                    if msg is None:
                        self._dead.add(k)
                        self._cond.notify_all()
                        return
                    name, ok, value = msg
                    self._replies[name] = (ok, value)
                    self._cond.notify_all()

    def submit(self, name: str, html: str, paper: str) -> None:
        """Send a document to the next worker in turn."""
        k = self._next % len(self._queues)
        self._next += 1
        self._sent[name] = k
        self._queues[k].put((name, html, paper))

    def result(self, name: str) -> bytes:
        k = self._sent[name]
        with self._cond:
            while name not in self._replies and k not in self._dead:
                self._cond.wait()
            if name not in self._replies:
                raise WorkedError("PDF worker process failed")
            ok, value = self._replies.pop(name)
        if not ok:
            raise WorkedError(value)
        return value

    def close(self) -> None:
        """Let the workers finish and exit (each ends when its request pipe closes)."""
        for q in self._queues:
            q.put(None)
        for t in self._threads:
            t.join()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Close normally; on an error, kill the workers first (nothing they make is wanted)."""
        if exc_type is not None:
            self.kill()
        else:
            self.close()

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.close()
