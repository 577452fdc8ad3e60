"""What an admin page shows of other models: only what its reader may view, one rule for every page and feed.

A reader who gets a 403 from a model's own list (in the admin or the API)
sees none of its rows anywhere else either: the dashboard's panels and its
JSON, the job page's schedule, workflow and worker (and its live JSON), the
job list's schedule filter.
"""

APP = "scheduler_app"


def may_view(user, model):
    """Whether ``user`` may view ``model``'s rows (a model or its name): its view permission, or its change one.

    The admin's own rule (``ModelAdmin.has_view_permission``): whoever may
    change a model may see it.
    """
    name = model if isinstance(model, str) else model._meta.model_name
    return user.has_perm(f"{APP}.view_{name}") or user.has_perm(f"{APP}.change_{name}")


def viewable(user, models):
    """Return the names among ``models`` whose rows ``user`` may view."""
    return {name for name in models if may_view(user, name)}
