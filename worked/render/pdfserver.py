"""A WeasyPrint process started early, so its import overlaps with solving and drawing formulas.

``worked sheet`` spends about half a second importing WeasyPrint and as long again on sympy and
the solve. :class:`LayoutServer` forks at the start of the command, before sympy is imported; the
child imports WeasyPrint and warms it up while the parent reads the problem, solves it and draws
the formulas, then lays out each HTML document it is sent and sends back the PDF bytes. The parent
never imports WeasyPrint. The PDFs are the same bytes as :func:`worked.render.pdf.html_to_pdf`
makes in one process (``tests/test_sheet_pdfmath.py`` compares them).

Messages are length-prefixed pickles over two pipes; the parent writes and reads them on helper
threads (started after the fork), so neither process ever waits on a full pipe.
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


def _serve(requests_fd: int, replies_fd: int) -> None:
    """The child: import and warm up WeasyPrint, then turn each (name, html, paper, formulas) into a PDF."""
    from . import mathconv
    from . import pdf as P
    from .sheet import outcome

    P.warm_up_weasyprint()
    with os.fdopen(requests_fd, "rb") as rin, os.fdopen(replies_fd, "wb") as rout:
        while True:
            msg = _read_msg(rin)
            if msg is None:
                return
            name, html, paper, formulas = msg
            mathconv.register_formulas(formulas)
            _write_msg(rout, (name, *outcome(lambda: P.html_to_pdf(html, paper=paper))))


class LayoutServer:
    """A forked WeasyPrint worker; :meth:`submit` documents, :meth:`result` their PDF bytes."""

    def __init__(self):
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        from .sheet import fork_child

        self.pid = fork_child(lambda: _serve(r1, w2), close=(w1, r2))
        os.close(r1)
        os.close(w2)
        self._out = queue.Queue()
        self._replies: dict[str, tuple[bool, object]] = {}
        self._cond = threading.Condition()
        self._dead = False
        self._writer = threading.Thread(target=self._write_loop, args=(os.fdopen(w1, "wb"),), daemon=True)
        self._reader = threading.Thread(target=self._read_loop, args=(os.fdopen(r2, "rb"),), daemon=True)
        self._writer.start()
        self._reader.start()

    def _write_loop(self, fh) -> None:
        try:
            with fh:
                while True:
                    msg = self._out.get()
                    if msg is None:
                        return
                    _write_msg(fh, msg)
        except OSError:
            pass

    def _read_loop(self, fh) -> None:
        with fh:
            while True:
                msg = _read_msg(fh)
                with self._cond:
                    if msg is None:
                        self._dead = True
                        self._cond.notify_all()
                        return
                    name, ok, value = msg
                    self._replies[name] = (ok, value)
                    self._cond.notify_all()

    def submit(self, name: str, html: str, paper: str) -> None:
        from . import mathconv

        short = mathconv.short_formula_urls(html)
        self._out.put((name, short, paper, mathconv.formulas_in(short)))

    def result(self, name: str) -> bytes:
        with self._cond:
            while name not in self._replies and not self._dead:
                self._cond.wait()
            if name not in self._replies:
                raise WorkedError("PDF worker process failed")
            ok, value = self._replies.pop(name)
        if not ok:
            raise WorkedError(value)
        return value

    def close(self) -> None:
        """Let the child finish and exit (it ends when its request pipe closes)."""
        self._out.put(None)
        self._writer.join()
        self._reader.join()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.close()
