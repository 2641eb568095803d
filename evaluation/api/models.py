"""REST API of the model registry: list and register models, read and update one."""

from __future__ import annotations

from django.contrib.auth.models import User
from rest_framework import generics, permissions, serializers

from benchmarks.permissions import IsOwnerOrMaintainer
from benchmarks.visibility import endpoint_visible
from evaluation.models import ModelEntry
from evaluation.services import (
    model_register,
    model_update,
)


class ModelEntrySerializer(serializers.ModelSerializer):
    """A registered model; its API key can be written but is never returned, its api_base only to whoever may see
    it (benchmarks.visibility.endpoint_visible)."""

    api_key = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="The provider key, stored encrypted; an empty string removes it. Required "
        "for kind litellm unless a maintainer registers it (the platform's keys "
        "are used then).",
    )
    has_api_key = serializers.BooleanField(read_only=True)
    owner: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    kind: serializers.Field = serializers.ChoiceField(  # a Field: ModelUpdateSerializer shows it read-only
        choices=[ModelEntry.Kind.LITELLM, ModelEntry.Kind.UPLOADED],
        default=ModelEntry.Kind.LITELLM,
        help_text="litellm: the platform calls it with its api_key; "
        "uploaded: only its uploaded generations are scored.",
    )

    class Meta:
        model = ModelEntry
        fields = [
            "name",
            "display_name",
            "organization",
            "kind",
            "litellm_model",
            "api_base",
            "api_key",
            "has_api_key",
            "knowledge_cutoff",
            "open_weights",
            "default_params",
            "owner",
            "created_at",
        ]
        read_only_fields = ["created_at"]
        extra_kwargs = {
            "litellm_model": {"help_text": 'e.g. "openai/gpt-4o-mini"; required for kind litellm'},
            "api_base": {
                "help_text": "The provider's endpoint; a user's model needs https at a public address. Returned to the "
                "model's owner and maintainers only (it can be a private address)."
            },
            "default_params": {
                "help_text": "Generation parameters: temperature, top_p, top_k, max_tokens, "
                "max_completion_tokens, seed, stop, presence_penalty, "
                "frequency_penalty, reasoning_effort."
            },
        }

    def to_representation(self, instance: ModelEntry) -> dict:
        data = super().to_representation(instance)
        request = self.context.get("request")
        if not endpoint_visible(user=request and request.user, owner_id=instance.owner_id):
            data.pop("api_base", None)
        return data


class ModelUpdateSerializer(ModelEntrySerializer):
    kind = serializers.CharField(read_only=True)

    class Meta(ModelEntrySerializer.Meta):
        read_only_fields = ["name", "created_at"]


class ModelList(generics.ListCreateAPIView):
    """Every registered model (public); POST registers one owned by the caller."""

    serializer_class = ModelEntrySerializer
    queryset = ModelEntry.objects.select_related("owner")

    def perform_create(self, serializer) -> None:
        serializer.instance = model_register(owner=self.request.user, **serializer.validated_data)


class ModelDetail(generics.RetrieveUpdateAPIView):
    """One model (public); PATCH by its owner or a maintainer."""

    serializer_class = ModelUpdateSerializer
    queryset = ModelEntry.objects.select_related("owner")
    lookup_field = "name"
    permission_classes = [permissions.IsAuthenticatedOrReadOnly, IsOwnerOrMaintainer]
    owner_field = "owner"
    http_method_names = ["get", "patch", "head", "options"]

    def perform_update(self, serializer) -> None:
        changes = dict(serializer.validated_data)
        api_key = changes.pop("api_key", None)
        serializer.instance = model_update(
            model=serializer.instance, api_key=api_key or None, clear_api_key=api_key == "", **changes
        )
