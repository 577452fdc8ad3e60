"""Serve the project's WSGI app for the API benchmarks (Django's threaded dev server).

Two differences from ``manage.py runserver --noreload``:

* header values are passed to the server as plain ``str``. The API's
  ``Location`` header is a DRF ``Hyperlink`` (a str subclass), which wsgiref
  (runserver) rejects with a 500 ("Header names/values must be of type str");
  production servers (gunicorn, uWSGI) accept it;
* each connection gets ``TCP_NODELAY``, as gunicorn sets it. wsgiref sends a
  response's headers and body in separate writes; on a kept-alive connection
  Nagle's algorithm held the body until the client's delayed ACK, ~40 ms per
  request (a single create measured ~50 ms p50 instead of ~10 ms, and the bulk
  API lost ~40 ms per 1,000-job request).

Usage: python bench/wsgi_server.py PORT
"""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings_ours")

from django.core.servers.basehttp import WSGIServer, run
from django.core.wsgi import get_wsgi_application

django_app = get_wsgi_application()


def application(environ, start_response):
    def plain_start_response(status, headers, exc_info=None):
        return start_response(status, [(str(k), str(v)) for k, v in headers], exc_info)

    return django_app(environ, plain_start_response)


class NoDelayWSGIServer(WSGIServer):
    def get_request(self):
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr


if __name__ == "__main__":
    run("127.0.0.1", int(sys.argv[1]), application, threading=True, server_cls=NoDelayWSGIServer)
