from django.apps import AppConfig


class SubmissionsConfig(AppConfig):
    name = "submissions"

    def ready(self) -> None:
        from django.urls import reverse

        from benchmarks.pages import page_extra_register
        from benchmarks.visibility import task_author_register
        from operations.events import Subject, subjects_register
        from operations.watchdog import WorkKind, work_register
        from submissions import selectors, services, validation, views
        from submissions.models import SetValidation, SetValidationPaper, ValidationReport

        page_extra_register("version", views.version_validation_section)  # a draft release's validation section
        page_extra_register("paper", views.paper_submitted_by)  # who submitted the paper
        task_author_register(selectors.tasks_written)  # its author always sees their own reference
        # Submissions' validations and the papers of set validations are lost work the watchdog looks after; one
        # lost again past VALIDATION_REDISPATCH_MAX is given up (it ends as an error of the platform).
        work_register(
            WorkKind(
                name="validation reports",
                model=ValidationReport,
                tasks=frozenset({"submissions.tasks.revision_validate", "submissions.tasks.revision_mutants"}),
                unfinished=services.validations_unfinished,
                moved_at=lambda report: (report.revision.created_at, report.started_at),
                claimable={"status__in": validation.ACTIVE},
                requeue=services.validation_requeue,
                give_up=lambda report, worker: services.validation_give_up(report=report, worker=worker),
            )
        )
        work_register(
            WorkKind(
                name="set validation papers",
                model=SetValidationPaper,
                tasks=frozenset({"submissions.tasks.set_paper_validate"}),
                unfinished=validation.set_papers_unfinished,
                moved_at=lambda paper: (paper.validation.created_at, paper.started_at),
                claimable={"status__in": validation.ACTIVE},
                requeue=validation.set_paper_requeue,
                give_up=lambda paper, worker: validation.set_paper_give_up(paper=paper, worker=worker),
            )
        )
        subjects_register(
            ValidationReport,
            lambda ids: {
                report.pk: Subject(
                    str(report.revision.submission), reverse("submission-detail", args=[report.revision.submission_id])
                )
                for report in ValidationReport.objects.filter(pk__in=ids).select_related("revision__submission")
            },
        )
        subjects_register(
            SetValidation,
            lambda ids: {
                run.pk: Subject(
                    str(run),
                    reverse("version-detail", args=[run.version.name]) + "#set-validation" if run.version else "",
                )
                for run in SetValidation.objects.filter(pk__in=ids).select_related("version")
            },
        )
