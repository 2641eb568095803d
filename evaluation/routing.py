"""Where a task message goes: an item of a task that needs a GPU goes to the `gpu` queue, which only workers with a
GPU consume; everything else by CELERY_TASK_ROUTES' table."""

from __future__ import annotations

GPU_QUEUE = "gpu"
# The item tasks by name: services queue them by name (operations.enqueue.task_named), never importing their module.
ITEM_GENERATE = "evaluation.tasks.item_generate"
ITEM_EVALUATE = "evaluation.tasks.item_evaluate"
# The agents app's tasks keep the names they had as evaluation/agents/tasks.py: queued messages carry them.
ITEM_AGENT = "evaluation.agents.tasks.item_agent"
AGENT_TURN = "evaluation.agents.tasks.agent_turn"
RUN_DISPATCH = "evaluation.tasks.run_dispatch"
ITEM_TASKS = frozenset({ITEM_EVALUATE, ITEM_AGENT})
PREPARE_TASK = "evaluation.tasks.task_prepare"  # a task revision's manifest and recording, made where it runs


class ItemRouter:
    """Celery router: (run, snippet, sample) of a GPU task's item -> the `gpu` queue; None: the next router."""

    # The queues this router may send a task to, beside the table's: read by operations.broker.task_routes().
    queues = {name: (GPU_QUEUE,) for name in ITEM_TASKS | {PREPARE_TASK}}

    def __call__(self, name: str, args, kwargs, options, task=None, **kw) -> dict | None:
        if name == PREPARE_TASK and args and not options.get("queue"):
            return {"queue": GPU_QUEUE} if preparation_needs_gpu(preparation_id=int(args[0])) else None
        if name not in ITEM_TASKS or options.get("queue") or not args or len(args) < 2:
            return None
        return {"queue": GPU_QUEUE} if snippet_needs_gpu(snippet_id=int(args[1])) else None


item_route = ItemRouter()


def snippet_needs_gpu(*, snippet_id: int) -> bool:
    from benchmarks.models import Snippet

    extra = Snippet.objects.filter(pk=snippet_id).values_list("task__extra_metadata", flat=True).first()
    return isinstance(extra, dict) and extra.get("gpu") is True


def preparation_needs_gpu(*, preparation_id: int) -> bool:
    from evaluation.models import TaskPreparation

    extra = TaskPreparation.objects.filter(pk=preparation_id).values_list("task__extra_metadata", flat=True).first()
    return isinstance(extra, dict) and extra.get("gpu") is True
