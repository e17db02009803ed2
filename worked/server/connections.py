"""The connections of ``worked serve``: a request must arrive in time, and one client address holds only so many.

uvicorn closes a keep-alive connection that stays idle after a response (``timeout_keep_alive``), but it
has no deadline for the request itself: a connection that sends nothing, a request head never finished
(slowloris: a header line every few seconds) or a body shorter than its Content-Length is kept open for
ever, each holding a file descriptor and, for a body, a request handler; nor does it limit the connections
of one client, so one address with a few thousand idle sockets takes every file descriptor the process
may open, and every other client waits.

:class:`Protocol` is uvicorn's own HTTP/1.1 protocol (:class:`uvicorn.protocols.http.h11_impl.H11Protocol`,
the class ``uvicorn.run(http=...)`` accepts in place of ``"h11"``) with two rules added in the
:class:`asyncio.Protocol` methods it is called through (``connection_made``, ``data_received``,
``connection_lost``) and the hook uvicorn calls when a response is sent (``on_response_complete``):

* **read deadline**: from the moment the server waits for a request (the connection opened, or the last
  response sent) the client has ``read_timeout`` seconds to send all of it, head and body; else the
  connection is closed. The clock does not restart with each byte, so a slowloris gains nothing by
  trickling. While the app works on a request that has fully arrived, the clock is off (the worker lanes'
  own deadlines apply). Whether the request has fully arrived is h11's state machine
  (``their_state``: IDLE or SEND_BODY is still waiting for the client), the parser uvicorn already runs;
  nothing is parsed twice.
* **connections per client address**: the ``per_client + 1``-th connection open at the same time from one
  address is answered ``503`` with ``Retry-After`` and closed at once, so one address cannot hold more than
  ``per_client`` file descriptors, and the others are still served. Behind a reverse proxy every client
  has the proxy's address: raise the limit there (``worked serve --connections-per-client``).

Why this and not another server or a middleware: an ASGI middleware cannot see a head that never ends
(uvicorn calls the app only once the head is parsed), nor a connection that sends nothing. hypercorn 0.18's
``read_timeout`` (off by default) bounds each read, so a body trickled a byte at a time stays open; granian
2.8 has a timeout for the head only (``--http1-header-read-timeout``) and a server-wide ``--backpressure``;
neither limits connections per address. The protocol class is the one place where a connection is seen from
its accept on, with uvicorn's parser still doing the parsing. What it uses of uvicorn: the class
``uvicorn.run(http=...)`` takes, its constructor, the asyncio.Protocol methods, its ``on_response_complete``
hook and its ``conn`` (the h11.Connection); a uvicorn that changed those fails tests/test_serve_robust.py.

The two numbers come from the app: ``create_app`` puts them in its lifespan state (the ASGI lifespan
``state``, which uvicorn hands each connection as ``app_state``) under :data:`STATE_KEY`; without it the
defaults below apply. The count per address is per server process (``--workers`` N: per process).
"""
from __future__ import annotations

import asyncio
import collections
import weakref

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

STATE_KEY = "worked.connections"
READ_TIMEOUT = 5.0      # seconds a client has to send a whole request (head and body)
PER_CLIENT = 256        # connections open at once from one client address

# the client's request is not all here yet: its head (IDLE, also between keep-alive requests) or its body
_WAITING = (h11.IDLE, h11.SEND_BODY)

# open connections per client address, one table per uvicorn server (its ServerState), so two servers in
# one process do not share counts
_OPEN: "weakref.WeakKeyDictionary[object, collections.Counter]" = weakref.WeakKeyDictionary()

_BUSY_BODY = b"too many connections from your address; close some and try again\n"
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"retry-after: 5\r\nconnection: close\r\ncontent-length: " + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n"
        + _BUSY_BODY)


class Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline per request and a cap on connections per client address
    (see the module docstring)."""

    def __init__(self, config, server_state, app_state, _loop=None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limits = app_state.get(STATE_KEY) or {}
        self.read_timeout = float(limits.get("read_timeout", READ_TIMEOUT))
        self.per_client = int(limits.get("per_client", PER_CLIENT))
        self._open = _OPEN.setdefault(server_state, collections.Counter())
        self._address: str | None = None
        self._deadline: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        address = peer[0] if isinstance(peer, (tuple, list)) and peer else None
        if address is not None and self._open[address] >= self.per_client:
            transport.write(BUSY)
            transport.close()
            return
        if address is not None:
            self._address = address
            self._open[address] += 1
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def connection_lost(self, exc) -> None:
        self._stop_clock()
        if self._address is not None:
            self._open[self._address] -= 1
            if self._open[self._address] <= 0:
                del self._open[self._address]
            self._address = None
        super().connection_lost(exc)

    # -- uvicorn's hook: a response has been sent, the next request may come
    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    # -- the read deadline
    def _watch(self) -> None:
        """Start the clock when the server begins to wait for the client's request; stop it once the
        request is all here. A clock already running is left alone: new bytes do not buy more time."""
        if self.transport is None or self.transport.is_closing():
            self._stop_clock()
        elif self.conn.their_state in _WAITING:
            if self._deadline is None:
                self._deadline = self.loop.call_later(self.read_timeout, self._too_slow)
        else:
            self._stop_clock()

    def _stop_clock(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing() and self.conn.their_state in _WAITING:
            # no response: the head may not be complete, and a body cut short has no request left to answer
            self.transport.close()
