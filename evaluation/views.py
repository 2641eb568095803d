"""Public leaderboard, model and run pages: server-rendered, htmx partials for sorting, filters and progress."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from benchmarks import visibility
from benchmarks.pages import page_extras
from benchmarks.permissions import maintainer_required, user_may_change
from benchmarks.selectors import user_is_maintainer, version_get
from common.htmx import HtmxHttpRequest
from common.pages import refusal_redirect
from evaluation import environments, reproducibility, services
from evaluation.forms import HarborJobForm, ModelEditForm, ModelRegisterForm, RunStartForm, RunUploadForm
from evaluation.harbor.imports import harbor_archive_import
from evaluation.harbor.parity import ParityError, parity_releases, parity_report
from evaluation.models import EnvironmentFailure, EvaluationRun, ModelEntry, Outcome, RunScore
from evaluation.run_modes import run_mode_get
from evaluation.selectors import item_pages as item_pages_selectors
from evaluation.selectors import items as items_selectors
from evaluation.selectors import monitoring as monitoring_selectors
from evaluation.selectors import reviews as reviews_selectors
from evaluation.selectors import runs as runs_selectors
from operations.broker import queues_status, workers_status
from operations.events import events_recent

# Problems of a refused upload listed on the page; the rest are counted (the API's answer lists them all).
UPLOAD_PROBLEMS_SHOWN = 200


def model_detail(
    request: HttpRequest,
    name: str,
    run_form: RunStartForm | None = None,
    upload_form: RunUploadForm | None = None,
    upload_problems: list[str] | None = None,
    harbor_form: HarborJobForm | None = None,
    harbor_problems: list[str] | None = None,
) -> HttpResponse:
    model = get_object_or_404(ModelEntry, name=name)
    may_change = user_may_change(user=request.user, owner_id=model.owner_id)
    may_run = model.kind != ModelEntry.Kind.UPLOADED and may_change
    may_upload = model.kind in (ModelEntry.Kind.LITELLM, ModelEntry.Kind.UPLOADED) and may_change
    problems = upload_problems or []
    context = {
        "model": model,
        "runs": runs_selectors.model_runs(model=model),
        "may_change": may_change,
        "endpoint_visible": visibility.endpoint_visible(user=request.user, owner_id=model.owner_id),
        "run_rule": runs_selectors.LEADERBOARD_RUN_RULE,
        "may_edit": may_change and model.kind in (ModelEntry.Kind.LITELLM, ModelEntry.Kind.UPLOADED),
        "run_form": (run_form or RunStartForm()) if may_run else None,
        "upload_form": upload_form or (RunUploadForm() if may_upload else None),
        "upload_problems": problems[:UPLOAD_PROBLEMS_SHOWN],
        "upload_problems_more": max(0, len(problems) - UPLOAD_PROBLEMS_SHOWN),
        "harbor_form": harbor_form or (HarborJobForm() if may_upload else None),
        "harbor_problems": (harbor_problems or [])[:UPLOAD_PROBLEMS_SHOWN],
        "harbor_problems_more": max(0, len(harbor_problems or []) - UPLOAD_PROBLEMS_SHOWN),
        "parity_releases": parity_releases(model=model, runs=runs_selectors.runs_visible(user=request.user)),
    }
    return render(
        request,
        "evaluation/model_detail.html",
        context,
        status=400 if run_form is not None or upload_form is not None or harbor_form is not None else 200,
    )


@login_required
def my_models(request: HttpRequest) -> HttpResponse:
    return render(request, "evaluation/my_models.html", {"models": runs_selectors.models_owned(user=request.user)})


@login_required
def my_runs(request: HttpRequest) -> HttpResponse:
    return render(request, "evaluation/my_runs.html", {"runs": runs_selectors.runs_started(user=request.user)})


def _service_errors(form, exc: Exception) -> None:
    """A service's refusal shown on the form: per field where it names one (every refused budget beside its own)."""
    if isinstance(exc, services.BudgetRefused):
        for name, problem in exc.problems.items():
            form.add_error(f"budget_{name}" if f"budget_{name}" in form.fields else None, problem)
    elif isinstance(exc, ValidationError) and hasattr(exc, "error_dict"):
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc.messages if isinstance(exc, ValidationError) else str(exc))


@login_required
@never_cache  # a re-rendered form holds the key the user typed: no cache keeps it
def model_new(request: HttpRequest) -> HttpResponse:
    """Register a model owned by the signed-in user (the same service as POST /api/v1/models/)."""
    form = ModelRegisterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            model = services.model_register(owner=request.user, **form.service_values())
        except (ValidationError, services.EvaluationError) as exc:
            _service_errors(form, exc)
        else:
            messages.success(request, f"Model {model.name} registered.")
            return redirect("model-detail", name=model.name)
    return render(request, "evaluation/model_new.html", {"form": form}, status=400 if form.errors else 200)


@login_required
@never_cache  # as model_new
def model_edit(request: HttpRequest, name: str) -> HttpResponse:
    """Change a model's description or call settings (its owner or a maintainer; the same service as PATCH
    /api/v1/models/<name>/): its endpoint cannot change while a run of it is queued or running."""
    model = get_object_or_404(ModelEntry, name=name)
    if not user_may_change(user=request.user, owner_id=model.owner_id) or model.kind not in (
        ModelEntry.Kind.LITELLM,
        ModelEntry.Kind.UPLOADED,
    ):
        raise PermissionDenied(f"only the owner of model {model.name} or a maintainer may change it")
    form = ModelEditForm.for_model(model, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.model_update(model=model, **form.service_values())
        except (ValidationError, services.EvaluationError) as exc:
            _service_errors(form, exc)
        else:
            messages.success(request, f"Model {model.name} changed.")
            return redirect("model-detail", name=model.name)
    return render(
        request, "evaluation/model_edit.html", {"model": model, "form": form}, status=400 if form.errors else 200
    )


def _model_form_page(name: str, anchor: str) -> HttpResponse:
    return redirect(reverse("model-detail", args=[get_object_or_404(ModelEntry, name=name).name]) + f"#{anchor}")


@login_required
@require_http_methods(["GET", "POST"])
def run_new(request: HttpRequest, name: str) -> HttpResponse:
    """Start a run of a model (its owner or a maintainer; the same service as POST /api/v1/runs/); a GET (a
    reload of the refused form's address, a bookmark) goes to the model's page, where the form is."""
    if request.method != "POST":
        return _model_form_page(name, "start-run")
    model = get_object_or_404(ModelEntry, name=name)
    if not user_may_change(user=request.user, owner_id=model.owner_id):
        raise PermissionDenied(f"only the owner of model {model.name} or a maintainer may run it")
    form = RunStartForm(request.POST)
    if form.is_valid():
        try:
            runs = services.runs_start(model=model, user=request.user, **form.service_values())
        except (ValidationError, services.EvaluationError) as exc:
            _service_errors(form, exc)
        else:
            if len(runs) > 1:
                messages.success(request, f"Started {len(runs)} runs: {', '.join(f'#{run.pk}' for run in runs)}.")
            return redirect("run-detail", pk=runs[0].pk)
    return model_detail(request, name, run_form=form)


@login_required
@require_http_methods(["GET", "POST"])
def run_upload(request: HttpRequest, name: str) -> HttpResponse:
    """Score an uploaded JSONL of generations (the model's owner or a maintainer; the same service and refusals as
    POST /api/v1/runs/upload/): a file with any bad line is refused whole, every line's problem listed. A GET goes
    to the model's page, as run_new's."""
    if request.method != "POST":
        return _model_form_page(name, "upload")
    model = get_object_or_404(ModelEntry, name=name)
    if not user_may_change(user=request.user, owner_id=model.owner_id):
        raise PermissionDenied(f"only the owner of model {model.name} or a maintainer may upload its generations")
    form = RunUploadForm(request.POST, request.FILES)
    problems: list[str] = []
    if form.is_valid():
        try:
            data = services.upload_bytes(form.cleaned_data["file"])
            run = services.run_from_upload(model=model, user=request.user, data=data, **form.service_values())
        except services.UploadError as exc:
            problems = exc.problems
        except (ValidationError, services.EvaluationError) as exc:
            _service_errors(form, exc)
        else:
            messages.success(
                request,
                f"{run.total_items} answer(s) stored as run {run.pk}; its items are being "
                f"scored (self-reported until a maintainer verifies it). Once scored it is the "
                f"model's leaderboard row in its setting unless you pinned another run of the "
                f"model there (its page lists every run).",
            )
            for warning in run.upload_warnings:
                messages.warning(request, warning)
            return redirect("run-detail", pk=run.pk)
    return model_detail(request, name, upload_form=form, upload_problems=problems)


@login_required
@require_http_methods(["GET", "POST"])
def run_harbor_import(request: HttpRequest, name: str) -> HttpResponse:
    """Import a Harbor job's archive as a self-reported agent run (the model's owner or a maintainer; the same
    service and refusals as POST /api/v1/runs/harbor/): a job with any problem is refused whole, every one listed. A
    GET goes to the model's page, as run_new's."""
    if request.method != "POST":
        return _model_form_page(name, "harbor")
    model = get_object_or_404(ModelEntry, name=name)
    if not user_may_change(user=request.user, owner_id=model.owner_id):
        raise PermissionDenied(f"only the owner of model {model.name} or a maintainer may import its runs")
    form = HarborJobForm(request.POST, request.FILES)
    problems: list[str] = []
    if form.is_valid():
        file = form.cleaned_data["file"]
        try:
            run, notes = harbor_archive_import(
                data=file, filename=file.name, version=form.cleaned_data["release"], model=model, user=request.user
            )
        except services.UploadError as exc:
            problems = exc.problems
        except (ValidationError, services.EvaluationError) as exc:
            _service_errors(form, exc)
        else:
            messages.success(
                request,
                f"The Harbor job's {run.total_items} trial(s) stored as run {run.pk} under scaffold {run.scaffold}; "
                "the platform scores every answer again (Harbor's rewards are shown beside, never used).",
            )
            for note in notes:
                messages.warning(request, note)
            return redirect("run-detail", pk=run.pk)
    return model_detail(request, name, harbor_form=form, harbor_problems=problems)


def model_parity(request: HttpRequest, name: str, release: str) -> HttpResponse:
    """A model's platform agent runs against its imported Harbor jobs on a release (the same report as `manage.py
    parity_report`), from the runs the viewer may see; `?format=json` is the report as parity_experiment.json."""
    model = get_object_or_404(ModelEntry, name=name)
    version = version_get(name=release, user=request.user)
    with_paper = request.GET.get("paper") != "without"
    try:
        report = parity_report(
            model=model, version=version, with_paper=with_paper, runs=runs_selectors.runs_visible(user=request.user)
        )
        missing = ""
    except ParityError as exc:
        report, missing = [], str(exc)
    if request.GET.get("format") == "json":
        if not report:  # a script asked for the file: it gets why there is none, as JSON
            return JsonResponse({"error": {"message": missing}}, status=404)
        response = JsonResponse(report, safe=False, json_dumps_params={"indent": 2})
        response["Content-Disposition"] = 'attachment; filename="parity_experiment.json"'
        return response
    context = {"model": model, "version": version, "with_paper": with_paper, "report": report, "missing": missing}
    return render(request, "evaluation/model_parity.html", context)


def _run_visible(request: HttpRequest, pk: int) -> EvaluationRun:
    return get_object_or_404(runs_selectors.runs_visible(user=request.user).select_related("model", "version"), pk=pk)


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run_visible(request, pk)
    items = item_pages_selectors.run_item_page(run=run, user=request.user, page=request.GET.get("page"))
    progress = items_selectors.run_progress(run)
    split_scores = runs_selectors.run_split_scores(run=run, user=request.user)
    usage_withheld = visibility.usage_withheld(run=run, user=request.user)
    mode = run_mode_get(run.mode)
    context = {
        "run": run,
        "progress": progress,
        "split_scores": split_scores,
        "held_out_scored": any(score.split == RunScore.Split.HELD_OUT for score in split_scores),
        "agent_summary": mode.run_summary(run=run, public_only=usage_withheld) if mode else None,
        "usage_withheld": usage_withheld,
        "usage_withheld_note": visibility.USAGE_WITHHELD_NOTE,
        "repeat_runs": runs_selectors.repeat_runs(run=run),
        "gpu_notice": items_selectors.run_gpu_notice(run=run),
        "paper_scores": runs_selectors.paper_scores_visible(run=run, user=request.user),
        "items": items,
        "items_page": str(items.number) if items.number > 1 else "",  # the progress poll keeps to this page
        "items_hidden": progress.done - items.paginator.count,
        "provenance_changes": run.provenance_changes.select_related("actor"),
        "may_steer": user_may_change(user=request.user, owner_id=run.created_by_id),
        "endpoint_visible": visibility.endpoint_visible(user=request.user, owner_id=run.model.owner_id),
        "pause_after": settings.RUN_PAUSE_AFTER_FAILURES,
        "may_verify": (
            run.provenance == EvaluationRun.Provenance.SELF_REPORTED
            and not run.api_base
            and run.status == EvaluationRun.Status.COMPLETED
            and user_is_maintainer(user=request.user)
        ),
    }
    # The evidence can quote hidden files (a flagged answer read them): maintainers only.
    context["flags"] = item_pages_selectors.run_flags(run=run) if user_is_maintainer(user=request.user) else None
    context["fork_server"] = (
        monitoring_selectors.run_forkserver(run=run) if user_is_maintainer(user=request.user) else None
    )
    return render(request, "evaluation/run_detail.html", context)


def run_item(request: HttpRequest, pk: int, outcome_pk: int) -> HttpResponse:
    """One item of a run: the outcome and its detail, the model's code beside the reference, and their diff."""
    run = _run_visible(request, pk)
    item = item_pages_selectors.run_item(run=run, outcome_pk=outcome_pk, user=request.user)
    if item is None:
        raise Http404("No such item in this run.")  # the same answer for a held-out item as for none
    extras = page_extras("item", version=run.version, snippet=item.outcome.snippet, user=request.user)
    return render(request, "evaluation/run_item.html", {"run": run, "item": item, "outcome": item.outcome, **extras})


def _run_page(request: HttpRequest, pk: int, *args, **kwargs) -> str:
    """Where a refused action on a run goes back to (common.pages): the run's page."""
    return reverse("run-detail", args=[pk])


@refusal_redirect(_run_page)
@maintainer_required
@require_POST
def run_verify(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run_visible(request, pk)
    services.run_verify(run=run, actor=request.user, reason=request.POST.get("reason", ""))
    messages.success(request, f"Run {run.pk} is verified.")
    return redirect("run-detail", pk=run.pk)


def run_manifest(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """The run's reproducibility record as a download (the same document as the API's)."""
    run = _run_visible(request, pk)
    response = StreamingHttpResponse(
        reproducibility.run_manifest_chunks(run=run, user=request.user), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-manifest.json"'
    return response


@refusal_redirect(lambda request, pk, outcome_pk: f"{reverse('run-detail', args=[pk])}#flags")
@maintainer_required
@require_POST
def outcome_review(request: HttpRequest, pk: int, outcome_pk: int) -> HttpResponse:
    outcome = get_object_or_404(Outcome.objects.select_related("run"), pk=outcome_pk, run_id=pk)
    services.outcome_review(
        outcome=outcome,
        reviewer=request.user,
        decision=request.POST.get("decision", ""),
        reason=request.POST.get("reason", ""),
    )
    messages.success(request, f"Outcome {outcome.pk}: {Outcome.Review(request.POST['decision']).label}.")
    if request.POST.get("return_to") == "item":  # reviewed from the item's page (the flag queue links there)
        return redirect("run-item", pk=pk, outcome_pk=outcome.pk)
    return redirect(f"{reverse('run-detail', args=[pk])}#flags")


def run_progress(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The run page's progress, polled while the run is active: with it, swapped in out of band, when the run started
    and (when more items have an outcome than the page showed: `shown`) its page of items. Once the run stops, htmx
    reloads the whole page, whose scores, items and buttons changed with it."""
    run = _run_visible(request, pk)
    progress = items_selectors.run_progress(run)
    context = {
        "run": run,
        "progress": progress,
        "pause_after": settings.RUN_PAUSE_AFTER_FAILURES,
        "gpu_notice": items_selectors.run_gpu_notice(run=run),
        "oob": bool(request.htmx),
        "items_page": page if (page := request.GET.get("page", "")).isdigit() else "",
    }
    if request.htmx and request.GET.get("shown") != str(progress.done):
        items = item_pages_selectors.run_item_page(run=run, user=request.user, page=context["items_page"] or None)
        context.update(items=items, items_hidden=progress.done - items.paginator.count, items_changed=True)
    response = render(request, "evaluation/_run_progress.html", context)
    if request.htmx and not run.is_active:
        response["HX-Refresh"] = "true"
    return response


@maintainer_required
def flag_queue(request: HttpRequest) -> HttpResponse:
    """Flagged answers awaiting a maintainer's review, across runs, newest first."""
    page = reviews_selectors.flag_queue_page(user=request.user, page=request.GET.get("page"))
    return render(request, "evaluation/flag_queue.html", {"page": page})


@maintainer_required
def operations(request: HttpRequest) -> HttpResponse:
    """Queues, workers and stalled runs, for maintainers keeping the platform running."""
    context = {
        "queues": queues_status(),
        "workers": workers_status(),
        "stalled": monitoring_selectors.runs_stalled(),
        "stall_seconds": settings.RUN_STALL_SECONDS,
        "active_runs": EvaluationRun.objects.filter(status__in=["queued", "running"]).select_related(
            "model", "version"
        ),
        "environment_failures": environments.environment_failures(),
        "events": events_recent(),
        "fork_servers": monitoring_selectors.runs_forkserver_recent(),
    }
    return render(request, "evaluation/operations.html", context)


@maintainer_required
@require_POST
def environment_retry(request: HttpRequest, pk: int) -> HttpResponse:
    failure = get_object_or_404(EnvironmentFailure, pk=pk)
    runs = environments.environment_retry(failure=failure)
    messages.success(
        request,
        f"Environment {failure.environment_hash[:12]} will be built again when next needed; "
        f"{runs} run(s) resumed for its items.",
    )
    return redirect("operations")


@refusal_redirect(lambda request, pk: reverse("operations"))
@maintainer_required
@require_POST
def run_resume(request: HttpRequest, pk: int) -> HttpResponse:
    """The operations page's Resume (maintainers, any stalled run)."""
    _run_resumed(request, get_object_or_404(EvaluationRun, pk=pk))
    return redirect("operations")


def _run_steerable(request: HttpRequest, pk: int) -> EvaluationRun:
    """A run its creator or a maintainer may cancel or resume (the API's rule: IsOwnerOrMaintainer on created_by)."""
    run = _run_visible(request, pk)
    if not user_may_change(user=request.user, owner_id=run.created_by_id):
        raise PermissionDenied(f"only whoever started run {run.pk} or a maintainer may cancel or resume it")
    return run


@refusal_redirect(_run_page)
@login_required
@require_POST
def run_cancel_own(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page's Cancel: the same service as POST /api/v1/runs/{id}/cancel/."""
    run = _run_steerable(request, pk)
    services.run_cancel(run=run)
    messages.success(request, f"Run {run.pk} cancelled: items already scored stay; Resume scores the rest.")
    return redirect("run-detail", pk=run.pk)


@refusal_redirect(_run_page)
@login_required
@require_POST
def run_resume_own(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page's Resume: the same service as POST /api/v1/runs/{id}/resume/."""
    _run_resumed(request, _run_steerable(request, pk))
    return redirect("run-detail", pk=pk)


def _model_runs(request: HttpRequest, pk: int) -> str:
    """Where a refused pin goes back to (common.pages): the runs on the run's model's page."""
    name = EvaluationRun.objects.filter(pk=pk).values_list("model__name", flat=True).get()
    return reverse("model-detail", args=[name]) + "#runs"


@refusal_redirect(_model_runs)
@login_required
@require_POST
def run_pin(request: HttpRequest, pk: int) -> HttpResponse:
    """The model page's choice of the leaderboard run (the model's owner or a maintainer): `pinned=yes` makes this
    run the model's row in its release and setting, `pinned=no` lifts the pin (the latest completed run again)."""
    run = _run_visible(request, pk)
    pinned = request.POST.get("pinned") != "no"
    if pinned:
        services.run_pin(run=run, actor=request.user)
    else:
        services.run_unpin(run=run, actor=request.user)
    setting = "with paper" if run.with_paper else "without paper"
    messages.success(
        request,
        f"Run {run.pk} is now the leaderboard run of {run.model.display_name} on {run.version.name} ({setting})."
        if pinned
        else f"Run {run.pk} is no longer pinned: the latest completed run in its setting is the row.",
    )
    return redirect(reverse("model-detail", args=[run.model.name]) + "#runs")


def _run_resumed(request: HttpRequest, run: EvaluationRun) -> None:
    dispatched = services.run_resume(run=run)
    # run_resume queues only the run's share now (run_feed), the rest as items finish: not every item missing.
    messages.success(
        request,
        f"Run {run.pk} resumed: its items without a result are queued again ({dispatched} now, the rest as those "
        "finish).",
    )


def release_preparation_section(*, version, user) -> dict:
    """A release page's preparation of its tasks (registered with benchmarks.pages): how many are prepared, and for
    maintainers which failed and why (a reference's output may tell of held-out tests)."""
    preparation = monitoring_selectors.release_preparation(version=version)
    if preparation is None:
        return {}
    failures = preparation.failed if user_is_maintainer(user=user) else []
    return {"preparation": preparation, "preparation_failures": failures}
