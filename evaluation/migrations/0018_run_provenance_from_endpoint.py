"""Existing runs get an endpoint snapshot and the provenance it implies.

A run the platform generated takes its model's current model string, api_base and default parameters (the best
record there is: nothing stored what earlier runs called). Such a run at an owner's api_base was labelled verified;
it becomes self-reported, with an audit record saying why. An upload a maintainer verified becomes a verified
upload (its audit record too), so it is told apart from the runs the platform generated.
"""

from django.db import migrations

ENDPOINT_REASON = ("provenance rule: verified means the platform called a provider at the provider's own address; "
                   "this run called its owner's own endpoint (api_base), which can answer anything")


def _uploaded(run) -> bool:
    return isinstance(run.params, dict) and run.params.get("uploaded") is True


def forward(apps, schema_editor):
    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    ProvenanceChange = apps.get_model("evaluation", "ProvenanceChange")
    ProvenanceChange.objects.filter(from_provenance="self_reported", to_provenance="verified").update(
        to_provenance="verified_upload")
    verified_uploads = ProvenanceChange.objects.filter(to_provenance="verified_upload").values("run_id")
    EvaluationRun.objects.filter(pk__in=verified_uploads, provenance="verified").update(provenance="verified_upload")
    for run in EvaluationRun.objects.filter(model__kind="litellm").select_related("model").iterator():
        if _uploaded(run):
            continue
        model = run.model
        run.litellm_model, run.api_base, run.model_params = model.litellm_model, model.api_base, model.default_params
        fields = ["litellm_model", "api_base", "model_params"]
        if run.api_base and run.provenance == "verified":
            ProvenanceChange.objects.create(run=run, from_provenance="verified", to_provenance="self_reported",
                                            actor=None, reason=ENDPOINT_REASON)
            run.provenance = "self_reported"
            fields.append("provenance")
        run.save(update_fields=fields)


def backward(apps, schema_editor):
    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    ProvenanceChange = apps.get_model("evaluation", "ProvenanceChange")
    relabelled = ProvenanceChange.objects.filter(reason=ENDPOINT_REASON, actor=None)
    EvaluationRun.objects.filter(pk__in=relabelled.values("run_id")).update(provenance="verified")
    relabelled.delete()
    EvaluationRun.objects.filter(provenance="verified_upload").update(provenance="verified")
    ProvenanceChange.objects.filter(to_provenance="verified_upload").update(to_provenance="verified")


class Migration(migrations.Migration):

    dependencies = [
        ("evaluation", "0017_run_endpoint_snapshot"),
    ]

    operations = [migrations.RunPython(forward, backward)]
