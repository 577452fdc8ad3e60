from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "scheduler_app.demo"
    label = "scheduler_demo"
    verbose_name = "Scheduler demo tasks"
