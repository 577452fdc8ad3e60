import argparse
import logging
import os
import sys

from django.core import checks
from django.core.management.base import CommandError

from ... import conf, sql
from ...checks import TAG
from ...dispatcher import shutdown
from ...dispatcher.shutdown import StopRequest, graceful_signals
from ...lifecycle.building import QUEUE
from ...runtime import supervisor as supervisor_module
from ...runtime import wiring
from ...runtime.guardian import Guardian
from ...runtime.supervisor import Supervisor, supervisor_signals
from ...validation.settings import MAX_JOBS, MODES, PROCESSES, SETTINGS
from .. import arguments
from ..base import SchedulerCommand

logger = logging.getLogger("scheduler_app.dispatcher")

SHARED = "*"

WORDS = ", ".join(MODES[:-1]) + f" or {MODES[-1]}"  # the modes, for the errors


def queue_spec(text):
    """Parse NAME, NAME:CONCURRENCY or NAME:CONCURRENCY:MODE (the rules judge each part)."""
    parts = text.split(":")
    if len(parts) > 3 or any(not p.strip() for p in parts[1:]):
        raise argparse.ArgumentTypeError(f"use NAME, NAME:CONCURRENCY or NAME:CONCURRENCY:MODE ({WORDS})")
    name = arguments.rule(QUEUE)(parts[0].strip())
    slots = arguments.rule(SETTINGS["CONCURRENCY"])(parts[1]) if len(parts) > 1 else None
    mode = parts[2].strip() if len(parts) > 2 else None
    if mode is not None and mode not in MODES:
        raise argparse.ArgumentTypeError(f"unknown mode {mode!r}; use {WORDS}")
    return name, slots, mode


class Command(SchedulerCommand):
    help = (
        "Run the dispatcher: mirror pending jobs in a timed heap, claim due jobs "
        "when a worker slot is free, run them on a bounded thread pool."
    )
    # The scheduler's own checks and the models': a dispatcher serves no URL,
    # so it does not import the URLconf (the admin, the API, DRF) to check it.
    requires_system_checks = [TAG, checks.Tags.models]

    def add_arguments(self, parser):
        parser.add_argument(
            "--queue",
            type=queue_spec,
            action="append",
            dest="queues",
            metavar="NAME[:CONCURRENCY[:MODE]]",
            help="Serve this queue with its own slots (repeatable); MODE 'process' runs its jobs in worker "
            "processes (parallel CPU, hard timeouts), 'async' its async def tasks on one asyncio loop "
            "(hundreds of slots on one thread). Default: every queue, sharing --concurrency slots.",
        )
        parser.add_argument(
            "--concurrency",
            type=arguments.rule(SETTINGS["CONCURRENCY"]),
            default=None,
            help="Worker threads (per --queue without its own number). Default: SCHEDULER['CONCURRENCY'].",
        )
        parser.add_argument(
            "--horizon",
            type=arguments.rule(SETTINGS["HORIZON"]),
            default=None,
            help="Seconds of future jobs mirrored in the heap.",
        )
        parser.add_argument(
            "--poll-interval",
            type=arguments.rule(SETTINGS["POLL_INTERVAL"]),
            default=None,
            help="Seconds between change polls (the fallback to NOTIFY).",
        )
        parser.add_argument(
            "--lease",
            type=arguments.rule(SETTINGS["LEASE"]),
            default=None,
            help="Seconds a claim stays valid without a heartbeat.",
        )
        parser.add_argument(
            "--grace",
            type=arguments.rule(SETTINGS["GRACE"]),
            default=None,
            help="Seconds running jobs get to finish on SIGTERM/SIGINT.",
        )
        parser.add_argument("--burst", action="store_true", help="Exit 0 once nothing is due and nothing is running.")
        parser.add_argument(
            "--processes",
            type=arguments.rule(PROCESSES),
            default=1,
            help="Run N dispatcher processes under a supervisor that restarts any that dies "
            "and passes SIGTERM/SIGINT on (default 1: this process is the dispatcher).",
        )
        parser.add_argument("--supervised", action="store_true", help=argparse.SUPPRESS)
        parser.add_argument(
            "--max-jobs", type=arguments.rule(MAX_JOBS), default=None, help="Exit after running this many jobs."
        )

    def handle(self, *args, **options):
        # With no logging configured for the app, its lines go to stderr at INFO (a project's LOGGING wins).
        wiring.log_to_stderr_unless_configured()
        if options["processes"] > 1:
            return self._supervise(options)
        # From the first moment: a SIGTERM while the dispatcher is being
        # built is kept and stops it gracefully once it exists (exit 0).
        stop = StopRequest()
        with graceful_signals(stop):
            dispatcher = self._build(options, prewarm=True)
            # Kills this process if its leases would run out unrenewed with attempts in flight (paused, stuck).
            guardian = Guardian()
            dispatcher.leases.on_until.append(guardian.lease_until)
            dispatcher.on_exit.append(guardian.close)
            if not options["supervised"]:  # the supervisor prints the one banner
                self._banner(dispatcher)
            stop.attach(dispatcher.stop)
            with wiring.wakeups(dispatcher):
                dispatcher.run()
        logger.info(
            "dispatcher %s stopped: %d jobs processed, %d failed",
            dispatcher.store.worker_id,
            dispatcher.processed,
            dispatcher.failed,
        )
        if dispatcher.pool.live_threads() and sys.argv[1:2] == ["rundispatcher"]:
            # Threads still run attempts it handed back: they end with the process, now, so that
            # the others may take those jobs back (a thread a task started must not keep it alive).
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    def _supervise(self, options):
        """Run ``--processes`` dispatchers as children of this process; return when all stopped."""
        from django.conf import settings

        self._build(options)  # the same refusals as a single dispatcher, before any child starts
        child_options = []
        for name, slots, mode in options["queues"] or ():
            child_options += ["--queue", ":".join(str(part) for part in (name, slots, mode) if part)]
        for flag in ("concurrency", "horizon", "poll_interval", "lease", "grace", "max_jobs"):
            if options[flag] is not None:
                child_options += [f"--{flag.replace('_', '-')}", str(options[flag])]
        if options["burst"]:
            child_options.append("--burst")
        supervisor = Supervisor(
            supervisor_module.child_command(child_options),
            options["processes"],
            env=supervisor_module.child_env(settings.SETTINGS_MODULE),
            finite=bool(options["burst"] or options["max_jobs"]),
        )
        with supervisor_signals(supervisor):
            if shutdown.early_signals():
                supervisor.signal()  # a stop sent while Django started: start nothing
                return
            supervisor.start()
            self.stdout.write(
                f"supervisor {os.getpid()} | {options['processes']} dispatcher processes "
                f"(pids {', '.join(map(str, supervisor.pids()))}) | database {sql.dialect().name} | "
                f"each: {' '.join(child_options) or 'the defaults'}"
            )
            self.stdout.flush()
            supervisor.run()

    def _build(self, options, prewarm=False):
        known = conf.known_queues()
        concurrency = options["concurrency"] or conf.get("CONCURRENCY")
        modes = {}  # queue -> "thread", "process" or "async": the command line's, else SCHEDULER["QUEUES"]'s
        if options["queues"]:
            groups = {}
            for name, slots, mode in options["queues"]:
                if name in groups:
                    raise CommandError(f"queue {name!r} given twice", returncode=2)
                groups[name] = ({name}, slots or concurrency)
                modes[name] = mode or conf.queue_mode(name)
        else:
            groups = {SHARED: (set(known), concurrency)}
            modes = {name: conf.queue_mode(name) for name in known}
        process_queues = {name for name, mode in modes.items() if mode == "process"}
        return wiring.create(
            groups,
            process_queues=process_queues,
            async_queues={name for name, mode in modes.items() if mode == "async"},
            lease=options["lease"],
            horizon=options["horizon"],
            poll_interval=options["poll_interval"],
            grace=options["grace"],
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            prewarm=prewarm,
        )

    def _banner(self, dispatcher):
        vendor = sql.dialect().name
        slots = ", ".join(f"{'all' if g == SHARED else g}:{n}" for g, (_, n) in dispatcher.groups.items())
        if wiring.uses_notify():
            wakeups = "notify"
        elif dispatcher.change_check_interval:
            wakeups = f"data_version every {dispatcher.change_check_interval * 1000:g}ms"
        else:
            wakeups = "poll"
        self.stdout.write(
            f"dispatcher {dispatcher.store.worker_id} | queues {', '.join(sorted(dispatcher.queues))} | "
            f"slots {slots} | database {vendor} | wake-ups {wakeups} "
            f"(poll every {dispatcher.poll_interval:g}s) | horizon {dispatcher.horizon:g}s"
            + (
                f" | in worker processes: {', '.join(sorted(dispatcher.process_queues))}"
                if dispatcher.process_queues
                else ""
            )
            + (
                f" | on an asyncio loop: {', '.join(sorted(dispatcher.async_queues))}"
                if dispatcher.async_queues
                else ""
            )
            + (" | burst" if dispatcher.burst else "")
        )
        self.stdout.flush()
