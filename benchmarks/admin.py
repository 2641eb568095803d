from django.contrib import admin

from benchmarks.models import (
    BenchmarkVersion,
    Blob,
    Paper,
    PromptProtocol,
    Snippet,
    SnippetRetirement,
    Task,
    VersionTask,
)


@admin.register(Paper)
class PaperAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "venue", "arxiv_v1_date", "first_commit_date"]
    search_fields = ["slug", "title"]


class SnippetInline(admin.TabularInline):
    model = Snippet
    fields = readonly_fields = ("file_path", "name", "depth", "loc", "start_line", "end_line")
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    search_fields = ["paper__slug", "paper__title"]
    list_display = ["paper", "revision", "content_hash", "environment_hash", "created_at"]
    list_filter = ["paper"]
    # A task's content is immutable (new content is a new revision); requirements only enter through the policy.
    readonly_fields = ["content_hash", "environment_hash", "files", "test_entry_point", "requirements"]
    inlines = [SnippetInline]


@admin.register(Snippet)
class SnippetAdmin(admin.ModelAdmin):
    list_display = ["name", "task", "file_path", "depth", "loc"]
    list_filter = ["task__paper"]
    search_fields = ["name"]
    readonly_fields = ["task", "parent", "code_hash"]


class VersionTaskInline(admin.TabularInline):
    model = VersionTask
    extra = 0
    autocomplete_fields = ["task"]


class SnippetRetirementInline(admin.TabularInline):
    model = SnippetRetirement
    extra = 0
    raw_id_fields = ["snippet"]


@admin.register(BenchmarkVersion)
class BenchmarkVersionAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "manifest_hash", "published_at"]
    list_filter = ["status"]
    inlines = [VersionTaskInline, SnippetRetirementInline]
    readonly_fields = ["manifest", "manifest_hash", "published_at", "changelog", "downloads", "previous"]

    def get_readonly_fields(self, request, obj=None):
        # A published version is frozen: nothing but its notes can change.
        if obj is not None and obj.is_frozen:
            return [f.name for f in obj._meta.fields if f.name != "notes"]
        return self.readonly_fields

    def get_inlines(self, request, obj):
        return [] if obj is not None and obj.is_frozen else self.inlines


@admin.register(Blob)
class BlobAdmin(admin.ModelAdmin):
    list_display = ["sha256", "size"]


@admin.register(PromptProtocol)
class PromptProtocolAdmin(admin.ModelAdmin):
    """Read only: runs and releases name protocols, so one is added (protocol_add) and never changed."""

    list_display = ["name", "masking", "context_join", "masked_header", "created_at"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
