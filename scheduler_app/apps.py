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
        connect_receivers()
        # Rows written around the service read without an error (readable.py).
        readable.install()
        # A cancelled job's django.tasks line says cancelled, at INFO.
        taskresults.install_log_filter()
        # A SIGTERM while the dispatcher starts must stop it gracefully, not
        # kill it: hold signals from here until the command takes over.
        from .dispatcher.shutdown import hold_signals_for_dispatcher

        hold_signals_for_dispatcher(sys.argv)
        checks.register()


def connect_receivers():
    """Connect the app's receivers: here, once, never as the side effect of importing a module."""
    from django.test.signals import setting_changed

    from . import conf, signals, taskresults
    from .lifecycle import workflows

    setting_changed.connect(conf.on_setting_changed, dispatch_uid="scheduler_app.conf")
    setting_changed.connect(taskresults.on_setting_changed, dispatch_uid="scheduler_app.taskresults")
    signals.workflow_closed.connect(workflows.closed, dispatch_uid="scheduler_app.lifecycle.workflows.closed")
