import sys

from django.apps import AppConfig


class SchedulerAppConfig(AppConfig):
    name = "scheduler_app"
    verbose_name = "Scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks, registry, taskresults
        from .sql import readable

        registry.autodiscover()
        # Rows written around the service read without an error (readable.py).
        readable.install()
        # A cancelled job's django.tasks line says cancelled, at INFO.
        taskresults.install_log_filter()
        # A SIGTERM while the dispatcher starts must stop it gracefully, not
        # kill it: hold signals from here until the command takes over.
        from .dispatcher.shutdown import hold_signals_for_dispatcher

        hold_signals_for_dispatcher(sys.argv)
        checks.register()
