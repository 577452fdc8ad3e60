"""Views of the REST API. Thin: every state change is a call to the lifecycle service.

Errors from the service become DRF error responses in
``scheduler_app.api.exceptions.exception_handler``: InvalidTransition -> 409,
Job.DoesNotExist -> 404, django ValidationError -> 400.
"""

from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, PolymorphicProxySerializer
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import conf, lifecycle, registry
from ..maintenance import leader
from ..models import Job, Queue, Worker
from ..observability import stats
from ..vocabulary.bounds import BULK_MAX
from . import previews
from .base import RowsAPI, SchedulerAPI, audit
from .exceptions import Conflict
from .filters import MAX_ID, JobFilter, matching
from .observability import LOG_PARAMETERS, PaginatedJobLogSerializer, job_logs
from .permissions import needs
from .resources import QueueLimitsSerializer, QueueSerializer, StatsSerializer, TaskSerializer, WorkerSerializer
from .schema import DETAIL_ERROR, FIELD_ERRORS, QUERY_ERRORS, extend_schema, extend_schema_view
from .serializers import (
    BulkActionSerializer,
    BulkCreateSerializer,
    BulkRetrySerializer,
    DuplicateSerializer,
    JobCreateSerializer,
    JobListEntrySerializer,
    JobSerializer,
    RescheduleSerializer,
    RetrySerializer,
)


# What a create answers for a job that already held the unique key: the job
# for who may view jobs, its id only for anyone else.
def _job_or_duplicate(many=False):
    return PolymorphicProxySerializer(
        component_name="JobOrDuplicate",
        serializers=[JobSerializer, DuplicateSerializer],
        resource_type_field_name=None,
        many=many,
    )


DUPLICATE_TEXT = (
    "A job holds this unique_key; nothing created. The job, for a caller with view_job; "
    'otherwise {"id": N, "duplicate": true}.'
)


def _email_example(name, **when):
    """Return a request body example for Swagger UI's "Try it out": a built-in email, sent ``when``."""
    value = {
        "task": "scheduler_app.tasks.send_email",
        "kwargs": {"to": "ops@example.com", "subject": "Report", "body": "Ready."},
        **when,
    }
    return OpenApiExample(name, request_only=True, value=value)


def id_only(job):
    """Return a job that held a unique key as a caller without view_job sees it."""
    return {"id": job.pk, "duplicate": True}


@extend_schema_view(
    list=extend_schema(summary="List jobs (filtered, ordered, paginated; args, kwargs and result cut to 4 KiB)"),
    retrieve=extend_schema(summary="Show one job", responses={200: JobSerializer, 404: DETAIL_ERROR}),
)
class JobViewSet(RowsAPI, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    required_permissions = {
        "list": needs("view", Job),
        "retrieve": needs("view", Job),
        "create": needs("add", Job),
        "bulk": needs("add", Job),
        "partial_update": needs("change", Job),
        "cancel": needs("change", Job),
        "retry": needs("change", Job),
        "bulk_cancel": needs("change", Job),
        "bulk_retry": needs("change", Job),
        "logs": needs("view", Job),
    }
    serializer_class = JobSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = JobFilter

    def get_queryset(self):
        jobs = Job.objects.select_related("created_by").order_by("-id")
        return previews.bounded(jobs) if self.action == "list" else jobs

    def get_serializer_class(self):
        return JobListEntrySerializer if self.action == "list" else JobSerializer

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        return previews.fill(page) if self.action == "list" else page

    def _may_view(self):
        """Whether the caller may see a job that held its key (least privilege: without view_job, its id only)."""
        return self.request.user.has_perms(needs("view", Job))

    def get_object(self):
        """Return the job named in the URL; 404 for anything that is not an id.

        Query-string filters are not applied to a single job.
        """
        raw = self.kwargs["pk"]
        if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_ID:
            raise NotFound("No job has this id.")
        return get_object_or_404(self.get_queryset(), pk=int(raw))

    def _respond(self, job, status_code=status.HTTP_200_OK, headers=None):
        serializer = self.get_serializer(job)
        return Response(serializer.data, status=status_code, headers=headers)

    @extend_schema(
        summary="Create a job",
        request=JobCreateSerializer,
        # Swagger UI's "Try it out" starts from this body (not from every
        # property, which would send execute_at and delay together).
        examples=[
            _email_example("In a minute", delay=60),
            _email_example("At a time", execute_at="2030-01-01T09:00:00+00:00", priority=5),
        ],
        responses={
            201: OpenApiResponse(JobSerializer, description="Created."),
            200: OpenApiResponse(_job_or_duplicate(), description=DUPLICATE_TEXT),
            400: FIELD_ERRORS,
        },
    )
    def create(self, request):
        serializer = JobCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        spec = JobCreateSerializer.enqueue_spec(serializer.validated_data)
        with transaction.atomic():
            job, created = lifecycle.enqueue(created_by=request.user, **spec)
            if created:
                audit(request, "create", object_id=job.pk, detail={"task": job.task, "kwargs": job.kwargs})
        if not created:
            return self._respond(job) if self._may_view() else Response(id_only(job))
        data = self.get_serializer(job).data
        # str(): the URL is a DRF Hyperlink (a str subclass) that wsgiref refuses.
        return Response(data, status=status.HTTP_201_CREATED, headers={"Location": str(data["url"])})

    @extend_schema(
        summary=f"Create up to {BULK_MAX:,} jobs in one transaction",
        request=BulkCreateSerializer,
        responses={
            201: OpenApiResponse(
                _job_or_duplicate(many=True),
                description="The jobs, in request order; where a job held an item's unique_key, that job "
                '(for a caller with view_job) or {"id": N, "duplicate": true}.',
            ),
            400: OpenApiResponse(
                OpenApiTypes.OBJECT, description='Nothing created. Errors by index: {"jobs": {"3": {"task": ["..."]}}}.'
            ),
            409: DETAIL_ERROR,
        },
    )
    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None)
    def bulk(self, request):
        serializer = BulkCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            with transaction.atomic():
                results = lifecycle.enqueue_many_created(
                    serializer.enqueue_specs(), created_by=request.user, max_size=BULK_MAX
                )
                made = [job.pk for job, created in results if created]
                if made:
                    audit(request, "bulk_create", filter={"id__in": made}, count=len(made))
        except lifecycle.BulkValidationError as exc:
            raise ValidationError({"jobs": exc.by_index}) from None
        except IntegrityError:
            # Another request took one of the unique_keys between the
            # lifecycle's check and its insert; the transaction rolled back.
            raise Conflict(
                "A unique_key of this request was taken by a concurrent request; "
                "nothing was created. Send the request again."
            ) from None
        # Whole: the jobs made now, and for who may view jobs the ones that held a key.
        whole = [(job, created or self._may_view()) for job, created in results]
        written = iter(self.get_serializer([job for job, shown in whole if shown], many=True).data)
        data = [next(written) if shown else id_only(job) for job, shown in whole]
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Reschedule a pending job (execute_at, priority)",
        request=RescheduleSerializer,
        responses={200: JobSerializer, 400: FIELD_ERRORS, 404: DETAIL_ERROR, 409: DETAIL_ERROR},
    )
    def partial_update(self, request, pk=None):
        job = self.get_object()
        serializer = RescheduleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic():
            job = lifecycle.reschedule(job.pk, **serializer.validated_data)
            audit(request, "reschedule", object_id=job.pk, detail=serializer.validated_data)
        return self._respond(job)

    @extend_schema(
        summary="Cancel a job (pending: at once; running: cancel_requested)",
        request=None,
        responses={200: JobSerializer, 404: DETAIL_ERROR, 409: DETAIL_ERROR},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        with transaction.atomic():
            outcome = lifecycle.cancel(job.pk)
            audit(request, "cancel", object_id=job.pk, detail={"outcome": outcome})
        job.refresh_from_db()
        return self._respond(job)

    @extend_schema(
        summary='Retry a failed or cancelled job (a time still ahead is kept unless {"now": true})',
        request=RetrySerializer,
        responses={200: JobSerializer, 400: FIELD_ERRORS, 404: DETAIL_ERROR, 409: DETAIL_ERROR},
    )
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        pk = self.get_object().pk
        body = RetrySerializer(data=request.data if request.data else {})
        body.is_valid(raise_exception=True)
        with transaction.atomic():
            job = lifecycle.retry(pk, run_now=body.validated_data["now"])
            audit(request, "retry", object_id=job.pk)
        return self._respond(job)

    def _matching(self, request, serializer_class=BulkActionSerializer):
        """Return the jobs the body's "filter" matches (``filters.matching``: the list's own filters); 400 else."""
        serializer = serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            return matching(serializer.validated_data["filter"]), serializer.validated_data
        except ValueError as exc:
            raise ValidationError({"filter": exc.args[0]}) from None

    @extend_schema(
        operation_id="jobs_bulk_cancel",
        summary="Cancel every job the filter matches (pending and waiting: at once; running: cancel_requested)",
        request=BulkActionSerializer,
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description='{"cancelled": n, "cancel_requested": m}: n jobs cancelled or asked to stop, '
                "m of them running (asked to stop). In batches: a job that changed meanwhile is left alone.",
            ),
            400: FIELD_ERRORS,
        },
    )
    @action(detail=False, methods=["post"], url_path="cancel", filter_backends=[], pagination_class=None)
    def bulk_cancel(self, request):
        jobs, _ = self._matching(request)
        cancelled, requested = lifecycle.cancel_matching(jobs)
        audit(
            request,
            "bulk_cancel",
            filter=request.data.get("filter"),
            count=cancelled + requested,
            detail={"cancel_requested": requested},
        )
        return Response({"cancelled": cancelled + requested, "cancel_requested": requested})

    @extend_schema(
        operation_id="jobs_bulk_retry",
        summary="Retry every failed or cancelled job the filter matches (times still ahead kept unless now)",
        request=BulkRetrySerializer,
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description='{"retried": n}. In batches: a job that changed meanwhile is left alone.',
            ),
            400: FIELD_ERRORS,
        },
    )
    @action(detail=False, methods=["post"], url_path="retry", filter_backends=[], pagination_class=None)
    def bulk_retry(self, request):
        jobs, body = self._matching(request, BulkRetrySerializer)
        retried = lifecycle.retry_matching(jobs, run_now=body["now"])
        audit(request, "bulk_retry", filter=request.data.get("filter"), count=retried)
        return Response({"retried": retried})

    @extend_schema(
        summary="A job's log records, oldest first (paginated)",
        parameters=LOG_PARAMETERS,
        responses={200: PaginatedJobLogSerializer, 400: QUERY_ERRORS, 404: DETAIL_ERROR},
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def logs(self, request, pk=None):
        return job_logs(self, request, self.get_object())


class TaskViewSet(SchedulerAPI, viewsets.ViewSet):
    required_permissions = {"list": needs("view", Job)}

    @extend_schema(summary="List registered tasks", responses=TaskSerializer(many=True))
    def list(self, request):
        tasks = [registry.describe(task) for task in registry.all_tasks()]
        return Response(TaskSerializer(tasks, many=True).data)


@extend_schema_view(list=extend_schema(summary="List dispatcher processes"))
class WorkerViewSet(RowsAPI, mixins.ListModelMixin, viewsets.GenericViewSet):
    required_permissions = {"list": needs("view", Worker)}
    serializer_class = WorkerSerializer
    queryset = Worker.objects.order_by("-started_at", "id")

    def get_queryset(self):
        return leader.with_leader(super().get_queryset())


class QueueViewSet(SchedulerAPI, viewsets.ViewSet):
    required_permissions = {
        "list": needs("view", Queue),
        "retrieve": needs("view", Queue),
        "partial_update": needs("change", Queue),
        "pause": needs("change", Queue),
        "resume": needs("change", Queue),
    }
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    @extend_schema(summary="List queues and their load", responses=QueueSerializer(many=True))
    def list(self, request):
        return Response(QueueSerializer(stats.queues(), many=True).data)

    @extend_schema(
        summary="Show one queue: its load, its limits and their use",
        responses={200: QueueSerializer, 404: DETAIL_ERROR},
    )
    def retrieve(self, request, name=None):
        self._known(name)
        return self._entry(name)

    @extend_schema(
        summary="Change a queue's limits (concurrency_limit, rate_limit, rate_period)",
        request=QueueLimitsSerializer,
        responses={200: QueueSerializer, 400: FIELD_ERRORS, 404: DETAIL_ERROR},
    )
    def partial_update(self, request, name=None):
        self._known(name)
        serializer = QueueLimitsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic():
            lifecycle.set_limits(name, **serializer.validated_data)
            audit(request, "set_limits", "queue", object_id=name, detail=dict(serializer.validated_data))
        return self._entry(name)

    @extend_schema(
        summary="Pause a queue: no dispatcher claims from it",
        request=None,
        responses={200: QueueSerializer, 404: DETAIL_ERROR},
    )
    @action(detail=True, methods=["post"])
    def pause(self, request, name=None):
        return self._set_paused(request, name, lifecycle.pause_queue)

    @extend_schema(summary="Resume a paused queue", request=None, responses={200: QueueSerializer, 404: DETAIL_ERROR})
    @action(detail=True, methods=["post"])
    def resume(self, request, name=None):
        return self._set_paused(request, name, lifecycle.resume_queue)

    @staticmethod
    def _known(name):
        if name not in conf.known_queues():
            raise NotFound(f"Unknown queue '{name}'. GET /api/queues/ lists them.")

    @staticmethod
    def _entry(name):
        entry = next(q for q in stats.queues() if q["name"] == name)
        return Response(QueueSerializer(entry).data)

    def _set_paused(self, request, name, change):
        self._known(name)
        with transaction.atomic():
            paused = change(name)
            audit(request, "pause" if paused else "resume", "queue", object_id=name)
        return self._entry(name)


class StatsView(SchedulerAPI, APIView):
    required_permissions = {"get": needs("view", Job)}

    @extend_schema(summary="Counts, lag, throughput and live workers", responses=StatsSerializer)
    def get(self, request):
        return Response(StatsSerializer(stats.overview()).data)
