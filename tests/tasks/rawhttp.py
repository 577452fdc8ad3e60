"""A raw TCP peer for the webhook tests: it reads a request, then a script writes whatever bytes it likes.

http.server cannot send a malformed status line, trickle a header or flood
``100 Continue``; this peer can. Each connection runs on its own thread;
``close()`` stops every script at its next wait.
"""

import socket
import threading

from django.test import override_settings


class RawPeer:
    def __init__(self, script):
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)  # accept() wakes to see close()
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.stopped = threading.Event()
        self.requests = []
        threading.Thread(target=self._serve, name="raw-peer", daemon=True).start()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), name="raw-peer-conn", daemon=True).start()

    def _handle(self, conn):
        with conn:
            conn.settimeout(60)
            try:
                self.requests.append(self._request(conn))
                self.script(self, conn)
            except OSError:
                pass  # the client gave up and closed: what the slow scripts expect

    def _request(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                return data
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
        )
        while len(body) < length:
            body += conn.recv(65536)
        return head + b"\r\n\r\n" + body

    def trickle(self, conn, data, every, then=b""):
        """Send ``data`` one byte per ``every`` seconds (until closed), then ``then``."""
        for i in range(len(data)):
            if self.stopped.wait(every):
                return
            conn.sendall(data[i : i + 1])
        conn.sendall(then)

    def repeat(self, conn, data, every, times=10_000):
        """Send ``data`` again and again, one per ``every`` seconds, until closed."""
        for _ in range(times):
            conn.sendall(data)
            if self.stopped.wait(every):
                return

    def close(self):
        self.stopped.set()
        self.listener.close()


def start_peers():
    """Yield a function that starts a RawPeer running ``script(peer, conn)``; close them all after."""
    peers = []

    def start(script):
        peers.append(RawPeer(script))
        return peers[-1]

    yield start
    for peer in peers:
        peer.close()


def allow_peer(peer, **more):
    """Allow-list the peer's host and port; more settings as keyword arguments."""
    return override_settings(SCHEDULER={"WEBHOOK_ALLOWED_HOSTS": [f"127.0.0.1:{peer.port}"], **more})


def answer(data):
    """A script that sends ``data`` and closes."""

    def script(peer, conn):
        conn.sendall(data)

    return script
