"""An agent item's trajectory: one row per item, and every step stored as it happens (docs/AGENT_RUNS.md).

The tables keep the names they had as models of the `evaluation` app (moved by a state-only migration pair).
"""

from __future__ import annotations

from django.db import models


class AgentTrajectory(models.Model):
    """One agent item (run, snippet, sample): what it used and what ended it."""

    class End(models.TextChoices):
        RUNNING = "", "still running"
        SUBMITTED = "submitted", "submitted"
        TURNS = "turns", "turn budget"
        TOKENS = "tokens", "token budget"
        SECONDS = "seconds", "wall-time budget"
        COST = "cost", "cost budget"
        MODEL_ERROR = "model_error", "the model call failed"
        STORAGE = "storage", "trajectory size cap"
        CONTEXT = "context", "the model's context window"
        DISK = "disk", "workspace disk limit"
        ERROR = "error", "the item failed"

    run = models.ForeignKey("evaluation.EvaluationRun", on_delete=models.CASCADE, related_name="trajectories")
    snippet = models.ForeignKey("benchmarks.Snippet", on_delete=models.PROTECT, related_name="+")
    sample = models.PositiveSmallIntegerField(default=0)
    budget = models.JSONField(default=dict, help_text="The budget it had: {turns, tokens, seconds, cost}.")
    ended_by = models.CharField(max_length=20, choices=End.choices, blank=True, default="")
    turns = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="USD; null: unknown for at least one turn (never shown as 0).",
    )
    seconds = models.FloatField(default=0.0)
    answer_problem = models.TextField(blank=True, help_text="Why no answer could be read from the final file.")
    steps_bytes = models.PositiveBigIntegerField(
        default=0, help_text="The stored steps' text, capped by AGENT_TRAJECTORY_BYTES."
    )
    workspace_snapshot = models.CharField(
        max_length=300, blank=True, help_text="Storage name of the workspace as the last stored step left it."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "evaluation_agenttrajectory"
        constraints = [models.UniqueConstraint(fields=["run", "snippet", "sample"], name="trajectory_unique_item")]

    def __str__(self) -> str:
        return f"trajectory of run {self.run_id}, snippet {self.snippet_id}, sample {self.sample}"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class AgentStep(models.Model):
    """One message of the conversation: the system and first user messages, each model turn (its text and tool
    calls), and each tool's output exactly as the model saw it."""

    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    trajectory = models.ForeignKey(AgentTrajectory, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(
        default=list, blank=True, help_text="Assistant steps: [{id, name, arguments}] as the model asked."
    )
    tool_call_id = models.CharField(max_length=200, blank=True, help_text="Tool steps: the call answered.")
    tool_name = models.CharField(max_length=50, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    duration = models.FloatField(null=True, blank=True, help_text="Seconds of the model call or the tool.")
    budget_left = models.JSONField(
        default=dict, blank=True, help_text="What was left after this step: {turns, tokens, seconds, cost}."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "evaluation_agentstep"
        ordering = ["trajectory", "index"]
        constraints = [models.UniqueConstraint(fields=["trajectory", "index"], name="agentstep_unique_index")]

    def __str__(self) -> str:
        return f"step {self.index} ({self.role}) of trajectory {self.trajectory_id}"

    def as_dict(self) -> dict:
        return {
            "index": self.index,
            "role": self.role,
            "content": self.content,
            "tool_calls": self.tool_calls,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": None if self.cost is None else float(self.cost),
            "duration": self.duration,
            "budget_left": self.budget_left,
            "created_at": self.created_at.isoformat(),
        }
