"""Serve the project's WSGI app for the API benchmarks (Django's threaded dev server).

The one difference from ``manage.py runserver --noreload``: header values are
passed to the server as plain ``str``. The API's ``Location`` header is a DRF
``Hyperlink`` (a str subclass), which wsgiref (runserver) rejects with a 500
("Header names/values must be of type str"); production servers (gunicorn,
uWSGI) accept it. Usage: python bench/wsgi_server.py PORT
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings_ours")

from django.core.servers.basehttp import run  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

django_app = get_wsgi_application()


def application(environ, start_response):
    def plain_start_response(status, headers, exc_info=None):
        return start_response(status, [(str(k), str(v)) for k, v in headers], exc_info)

    return django_app(environ, plain_start_response)


if __name__ == "__main__":
    run("127.0.0.1", int(sys.argv[1]), application, threading=True)
