"""DBOS for the bench: the ``stamp`` workflow on a queue of ``worker_concurrency=4``.

``python -m bench.peers.dbos_app`` launches DBOS (its system database is the
peer's own database) and serves the queue until SIGTERM; ``--setup`` only
creates the system tables and the queue, so the driver's ``DBOSClient`` can
enqueue. DBOS polls a queue once a second (``polling_interval_sec``, its
default). Environment: BENCH_DSN.
"""

import signal
import sys
import threading

from dbos import DBOS

from bench.peers import pgstamp

QUEUE = "bench"
WORKFLOW = "bench_stamp"

DBOS(config={"name": "bench", "system_database_url": pgstamp.DSN})


@DBOS.workflow(name=WORKFLOW)
def stamp(key, due):
    pgstamp.record(key, due)


def main():
    DBOS.launch()
    DBOS.register_queue(QUEUE, worker_concurrency=4, on_conflict="always_update")
    if "--setup" in sys.argv:
        DBOS.destroy()
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy()


if __name__ == "__main__":
    main()
