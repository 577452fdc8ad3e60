"""Who may call what: staff users holding the model permission an action needs.

The same permissions the admin checks (``view_job``, ``add_job``,
``change_queue``, ...), declared per view and action in
``required_permissions``:

    required_permissions = {"list": needs("view", Job), "cancel": needs("change", Job)}

Keys are a viewset's action names, or for a plain ``APIView`` its
lower-case HTTP method names; ``ANY`` covers every action of a view (the
schema, the API root). An empty tuple means "any staff user". An action a
view does not declare is refused, so a new action stays closed until
someone says who may call it. Methods a view does not serve pass, so that
staff get DRF's 405 rather than a 403.
"""

from rest_framework.permissions import BasePermission

ANY = "*"
STAFF = ()


def needs(kind, model):
    """Return the model permission ``kind`` ("view", "add", "change", "delete") of ``model``."""
    return (f"{model._meta.app_label}.{kind}_{model._meta.model_name}",)


def served_action(view, request):
    """Return the name ``required_permissions`` knows the request's action by, or None.

    None: the view does not serve this method (DRF answers 405).
    """
    # A viewset ("list", "cancel", ...; "metadata" for OPTIONS). Not isinstance:
    # DRF imports this module (a setting) while rest_framework.viewsets loads.
    if getattr(view, "action_map", None) is not None:
        return view.action
    method = request.method.lower()
    if method == "head":
        method = "get"
    if method == "options" or hasattr(view, method):
        return method
    return None


def required_permissions(view, request):
    """Return the permissions the request needs, or None when nobody may make it."""
    declared = getattr(view, "required_permissions", {})
    action = served_action(view, request)
    if ANY in declared:
        return declared[ANY]
    if action is None or action in ("metadata", "options"):
        return STAFF
    return declared.get(action)


class StaffModelPermission(BasePermission):
    """Authenticated, active staff with every permission the view declares for the action.

    Superusers have every permission (Django's ``has_perms``). Anonymous
    requests are refused before anything else is looked at, so DRF answers
    401 (403 for authenticated users without the right).
    """

    def has_permission(self, request, view):
        user = request.user
        if not (user and user.is_authenticated and user.is_active and user.is_staff):
            return False
        needed = required_permissions(view, request)
        return needed is not None and user.has_perms(needed)
