"""REST endpoints of workflows: /api/workflows/, /api/workflows/{id}/, /retry/ and /cancel/.

Thin: the jobs of a request are the bulk endpoint's job bodies
(``BulkJobSerializer``: the same rules, ``depends_on_index`` and
``pass_results`` included); ``lifecycle.workflows`` creates a workflow and
derives its status (``derive_status``, the one rule); ``lifecycle.actions``
retries and cancels one.
"""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from .. import conf, lifecycle
from ..lifecycle import workflows
from ..models import JobStatus, Workflow, WorkflowStatus
from ..validation.workflows import WORKFLOW_NAME
from ..vocabulary import bounds
from .base import RowsAPI, audit
from .fields import RuleField, StrictKeysMixin
from .filters import MAX_ID
from .permissions import needs
from .schema import DETAIL_ERROR, FIELD_ERRORS, extend_schema, extend_schema_view
from .serializers import BoundedListField, BulkJobSerializer, JobCreateSerializer


class WorkflowCreateSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of POST /api/workflows/."""

    name = RuleField(WORKFLOW_NAME, help_text="A name to find it by (default: none).")
    jobs = BoundedListField(
        child=BulkJobSerializer(),
        allow_empty=False,
        min_length=1,
        max_length=bounds.BULK_MAX,
        help_text=f"1 to {bounds.BULK_MAX} job bodies, as for POST /api/jobs/bulk/ "
        "(depends_on_index: the jobs of this request it runs after; pass_results: receive their results).",
    )
    on_success = JobCreateSerializer(
        required=False, allow_null=True, help_text="Enqueued once when every job succeeded."
    )
    on_failure = JobCreateSerializer(
        required=False,
        allow_null=True,
        help_text="Enqueued once when the last job ended and any failed or was cancelled.",
    )
    on_finish = JobCreateSerializer(required=False, allow_null=True, help_text="Enqueued once when the last job ended.")


class WorkflowSerializer(serializers.ModelSerializer):
    """A workflow: its status (derived from its jobs now), counts by job status, and for one workflow its jobs."""

    status = serializers.SerializerMethodField(help_text="pending, running, succeeded, failed or cancelled.")
    counts = serializers.SerializerMethodField(help_text="How many of its jobs are in each status.")

    class Meta:
        model = Workflow
        fields = ["id", "name", "status", "counts", "created_at", "updated_at", "finished_at", "callbacks_enqueued_at"]
        read_only_fields = fields

    def _counts(self, workflow):
        found = self.context.get("counts")
        if found is None or workflow.pk not in found:
            found = self.context["counts"] = workflows.counts([workflow])
        return found[workflow.pk]

    def get_status(self, workflow) -> str:
        return workflows.derive_status(self._counts(workflow))

    def get_counts(self, workflow) -> dict[str, int]:
        found = self._counts(workflow)
        return {s: found.get(s, 0) for s in JobStatus.values}


class WorkflowDetailSerializer(WorkflowSerializer):
    jobs = serializers.SerializerMethodField(help_text="Its jobs in order: id, task, status.")
    results = serializers.SerializerMethodField(help_text="The result of each job that succeeded, by job id.")
    callbacks = serializers.SerializerMethodField(help_text="The callbacks' job specs, and the jobs enqueued for them.")

    class Meta(WorkflowSerializer.Meta):
        fields = [*WorkflowSerializer.Meta.fields, "jobs", "results", "callbacks"]
        read_only_fields = fields

    def _jobs(self, workflow):
        if "jobs" not in self.context:
            self.context["jobs"] = list(
                workflows.members(workflow).order_by("pk").values_list("pk", "task", "status", "result")
            )
        return self.context["jobs"]

    def get_jobs(self, workflow) -> list[dict]:
        return [{"id": pk, "task": task, "status": status} for pk, task, status, _ in self._jobs(workflow)]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_results(self, workflow):
        return {str(pk): result for pk, _, status, result in self._jobs(workflow) if status == "succeeded"}

    def get_callbacks(self, workflow) -> dict:
        return conf.filtered(workflow.callbacks) if isinstance(workflow.callbacks, dict) else {}


STATUS_FILTER = OpenApiParameter(
    "status", str, enum=WorkflowStatus.values, description="Only workflows in this status."
)
NAME_FILTER = OpenApiParameter("name", WORKFLOW_NAME.schema(), description="Only workflows of this name.")


@extend_schema_view(
    list=extend_schema(summary="List workflows (filter by status and name)", parameters=[STATUS_FILTER, NAME_FILTER]),
    retrieve=extend_schema(
        summary="Show one workflow: status, counts, jobs, results",
        responses={200: WorkflowDetailSerializer, 404: DETAIL_ERROR},
    ),
)
class WorkflowViewSet(RowsAPI, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    required_permissions = {
        "list": needs("view", Workflow),
        "retrieve": needs("view", Workflow),
        "create": needs("add", Workflow),
        "retry": needs("change", Workflow),
        "cancel": needs("change", Workflow),
    }
    serializer_class = WorkflowSerializer

    def get_queryset(self):
        found = Workflow.objects.order_by("-id")
        if self.action != "list":
            return found
        # An empty value filters nothing, as on the jobs' list.
        wanted = self.request.query_params.get("status") or None
        if wanted is not None:
            if wanted not in WorkflowStatus.values:
                raise ValidationError({"status": [f"Must be one of {', '.join(WorkflowStatus.values)}."]})
            found = workflows.with_status(found, wanted)
        name = self.request.query_params.get("name") or None
        if name is not None:
            try:
                WORKFLOW_NAME.check(name)
            except DjangoValidationError:
                raise ValidationError({"name": [WORKFLOW_NAME.message]}) from None
            found = found.filter(name=name)
        return found

    def get_serializer_class(self):
        return WorkflowSerializer if self.action == "list" else WorkflowDetailSerializer

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None:
            self._counts = workflows.counts(page)
        return page

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if getattr(self, "_counts", None) is not None:
            context["counts"] = self._counts
        return context

    def get_object(self):
        raw = self.kwargs["pk"]
        if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_ID:
            raise NotFound("No workflow has this id.")
        return get_object_or_404(Workflow.objects.all(), pk=int(raw))

    def _respond(self, workflow, status_code=status.HTTP_200_OK):
        workflow = Workflow.objects.get(pk=workflow.pk)
        return Response(
            WorkflowDetailSerializer(workflow, context=self.get_serializer_context()).data, status=status_code
        )

    @extend_schema(
        summary="Create a workflow: its jobs (linked by depends_on_index) and callbacks, in one transaction",
        request=WorkflowCreateSerializer,
        responses={
            201: OpenApiResponse(description='{"id": N, "status": "pending", "jobs": [ids in request order]}'),
            400: FIELD_ERRORS,
        },
    )
    def create(self, request):
        body = WorkflowCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        specs = [JobCreateSerializer.enqueue_spec(job) for job in data["jobs"]]
        callbacks = {
            name: JobCreateSerializer.enqueue_spec(data[name])
            for name in ("on_success", "on_failure", "on_finish")
            if data.get(name)
        }
        try:
            with transaction.atomic():
                workflow, jobs = workflows.create_workflow(
                    specs,
                    name=data.get("name") or "",
                    callbacks=callbacks,
                    created_by=request.user,
                    max_size=bounds.BULK_MAX,
                )
                audit(request, "create", "workflow", object_id=workflow.pk, count=len(jobs))
        except lifecycle.BulkValidationError as exc:
            raise ValidationError({"jobs": exc.by_index}) from None
        workflow.refresh_from_db()
        body = {"id": workflow.pk, "status": workflow.status, "jobs": [job.pk for job in jobs]}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Retry a workflow: its failed and cancelled jobs, and the dependents they cancelled",
        request=None,
        responses={200: WorkflowDetailSerializer, 404: DETAIL_ERROR, 409: DETAIL_ERROR},
    )
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        with transaction.atomic():
            workflow = lifecycle.retry_workflow(self.get_object().pk)
            audit(request, "retry", "workflow", object_id=workflow.pk)
        return self._respond(workflow)

    @extend_schema(
        summary="Cancel a workflow: every job that has not ended (running ones cooperatively)",
        request=None,
        responses={200: WorkflowDetailSerializer, 404: DETAIL_ERROR},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        with transaction.atomic():
            workflow = lifecycle.cancel_workflow(self.get_object().pk)
            audit(request, "cancel", "workflow", object_id=workflow.pk)
        return self._respond(workflow)
