"""The agent models as the `agents` app's, taken over from `evaluation` (evaluation/migrations/0036): their tables
exist already (evaluation 0023 to 0027 made them), so only Django's record of them is created. No row changes: the
`agents` content types are added after migrating, and the `evaluation` ones stay, unused (`remove_stale_contenttypes`
lists them)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("benchmarks", "0013_versiontask_replaced_by"),
        ("evaluation", "0036_agent_models_moved"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AgentTrajectory",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("sample", models.PositiveSmallIntegerField(default=0)),
                        (
                            "budget",
                            models.JSONField(
                                default=dict, help_text="The budget it had: {turns, tokens, seconds, cost}."
                            ),
                        ),
                        (
                            "ended_by",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("", "still running"),
                                    ("submitted", "submitted"),
                                    ("turns", "turn budget"),
                                    ("tokens", "token budget"),
                                    ("seconds", "wall-time budget"),
                                    ("cost", "cost budget"),
                                    ("model_error", "the model call failed"),
                                    ("storage", "trajectory size cap"),
                                    ("disk", "workspace disk limit"),
                                    ("error", "the item failed"),
                                ],
                                default="",
                                max_length=20,
                            ),
                        ),
                        ("turns", models.PositiveIntegerField(default=0)),
                        ("prompt_tokens", models.PositiveBigIntegerField(default=0)),
                        ("completion_tokens", models.PositiveBigIntegerField(default=0)),
                        (
                            "cost",
                            models.DecimalField(
                                blank=True,
                                decimal_places=6,
                                help_text="USD; null: unknown for at least one turn (never shown as 0).",
                                max_digits=12,
                                null=True,
                            ),
                        ),
                        ("seconds", models.FloatField(default=0.0)),
                        (
                            "answer_problem",
                            models.TextField(blank=True, help_text="Why no answer could be read from the final file."),
                        ),
                        (
                            "steps_bytes",
                            models.PositiveBigIntegerField(
                                default=0, help_text="The stored steps' text, capped by AGENT_TRAJECTORY_BYTES."
                            ),
                        ),
                        (
                            "workspace_snapshot",
                            models.CharField(
                                blank=True,
                                help_text="Storage name of the workspace as the last stored step left it.",
                                max_length=300,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="trajectories",
                                to="evaluation.evaluationrun",
                            ),
                        ),
                        (
                            "snippet",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT, related_name="+", to="benchmarks.snippet"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "evaluation_agenttrajectory",
                    },
                ),
                migrations.CreateModel(
                    name="AgentStep",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("index", models.PositiveIntegerField()),
                        (
                            "role",
                            models.CharField(
                                choices=[
                                    ("system", "System"),
                                    ("user", "User"),
                                    ("assistant", "Assistant"),
                                    ("tool", "Tool"),
                                ],
                                max_length=10,
                            ),
                        ),
                        ("content", models.TextField(blank=True)),
                        (
                            "tool_calls",
                            models.JSONField(
                                blank=True,
                                default=list,
                                help_text="Assistant steps: [{id, name, arguments}] as the model asked.",
                            ),
                        ),
                        (
                            "tool_call_id",
                            models.CharField(blank=True, help_text="Tool steps: the call answered.", max_length=200),
                        ),
                        ("tool_name", models.CharField(blank=True, max_length=50)),
                        ("prompt_tokens", models.PositiveIntegerField(blank=True, null=True)),
                        ("completion_tokens", models.PositiveIntegerField(blank=True, null=True)),
                        ("cost", models.DecimalField(blank=True, decimal_places=6, max_digits=12, null=True)),
                        (
                            "duration",
                            models.FloatField(
                                blank=True, help_text="Seconds of the model call or the tool.", null=True
                            ),
                        ),
                        (
                            "budget_left",
                            models.JSONField(
                                blank=True,
                                default=dict,
                                help_text="What was left after this step: {turns, tokens, seconds, cost}.",
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "trajectory",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="steps",
                                to="agents.agenttrajectory",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "evaluation_agentstep",
                        "ordering": ["trajectory", "index"],
                    },
                ),
                migrations.AddConstraint(
                    model_name="agenttrajectory",
                    constraint=models.UniqueConstraint(
                        fields=("run", "snippet", "sample"), name="trajectory_unique_item"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="agentstep",
                    constraint=models.UniqueConstraint(fields=("trajectory", "index"), name="agentstep_unique_index"),
                ),
            ],
            database_operations=[],
        ),
    ]
