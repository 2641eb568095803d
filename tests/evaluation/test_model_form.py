"""The model forms as a user meets them: empty parameter boxes, the typed key kept on a refused form of the same
POST and nowhere else, and a model of uploaded generations registered whatever the hidden call fields hold."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evaluation import services
from evaluation.models import ModelEntry

pytestmark = pytest.mark.django_db
KEY = "sk-typed-by-the-user-7f3a"


def test_parameter_boxes_start_empty_not_null(client, author):
    client.force_login(author)
    body = client.get(reverse("model-new")).content.decode()
    assert ">null</textarea>" not in body and 'name="default_params"' in body
    services.model_register(name="mine", display_name="Mine", litellm_model="openai/m", api_key=KEY, owner=author)
    assert ">null</textarea>" not in client.get(reverse("model-detail", args=["mine"])).content.decode()
    assert ">null</textarea>" not in client.get(reverse("model-edit", args=["mine"])).content.decode()


def test_a_refused_form_keeps_the_typed_key_only_in_that_response(client, author):
    client.force_login(author)
    response = client.post(
        reverse("model-new"),
        {"name": "bad name!", "display_name": "X", "kind": "litellm", "litellm_model": "openai/x", "api_key": KEY},
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert f'value="{KEY}"' in body
    assert "no-store" in response["Cache-Control"]
    assert KEY not in client.get(reverse("model-new")).content.decode()  # a fresh form never holds one
    services.model_register(name="mine", display_name="Mine", litellm_model="openai/m", api_key=KEY, owner=author)
    assert KEY not in client.get(reverse("model-edit", args=["mine"])).content.decode()  # the stored key: never
    assert KEY not in client.get(reverse("model-detail", args=["mine"])).content.decode()


def test_uploaded_kind_hides_and_ignores_the_call_fields(client, author):
    client.force_login(author)
    body = client.get(reverse("model-new")).content.decode()
    for name in ("litellm_model", "api_base", "api_key"):
        assert f'name="{name}"' in body and body.count('data-for-kind="litellm"') == 3
    response = client.post(
        reverse("model-new"),
        {
            "name": "offline",
            "display_name": "Offline",
            "kind": "uploaded",
            "litellm_model": "openai/x",
            "api_base": "https://e.example/v1",
            "api_key": KEY,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    model = ModelEntry.objects.get(name="offline")
    assert (model.kind, model.litellm_model, model.api_base, model.api_key_get()) == ("uploaded", "", "", None)
