"""A model's api_base (the endpoint the platform calls for it) is its owner's to see, and maintainers': a newcomer's
model page did not show its owner where the platform sends its prompts, and it can be a private address, so no one
else sees it, on the model's page, its runs' pages, the leaderboard, the API or a run's manifest."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from evaluation import services
from tests.conftest import client_for, download_body, page_text
from tests.leaderboard.test_leaderboard import evaluate

pytestmark = pytest.mark.django_db
OWN_ENDPOINT = "https://93.184.216.34/v1"  # a public address literal: no DNS needed to accept it


def _client(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def test_the_owner_and_maintainers_see_the_models_endpoint_and_no_one_else(author, other_author, maintainer):
    model = services.model_register(
        name="ada-model",
        display_name="Ada",
        litellm_model="openai/ada",
        owner=author,
        api_key="sk-ada-own",
        api_base=OWN_ENDPOINT,
    )
    page = reverse("model-detail", args=[model.name])
    for who, user in (("owner", author), ("maintainer", maintainer)):
        text = page_text(_client(user).get(page).content.decode())
        assert f"API base{OWN_ENDPOINT}: the platform calls this endpoint" in text, who
        assert client_for(user).get(f"/api/v1/models/{model.name}/").json()["api_base"] == OWN_ENDPOINT, who
        listed = {m["name"]: m for m in client_for(user).get("/api/v1/models/").json()["results"]}
        assert listed[model.name]["api_base"] == OWN_ENDPOINT, who
    for who, user in (("another user", other_author), ("a visitor", None)):
        body = _client(user).get(page).content.decode()
        assert "Ada" in body and OWN_ENDPOINT not in body and "data-api-base" not in body, who
        detail = client_for(user).get(f"/api/v1/models/{model.name}/").json()
        assert detail["litellm_model"] == "openai/ada" and "api_base" not in detail, who
        listed = {m["name"]: m for m in client_for(user).get("/api/v1/models/").json()["results"]}
        assert "api_base" not in listed[model.name], who


def test_the_owner_reads_that_a_model_without_an_endpoint_calls_its_providers_own_address(author):
    model = services.model_register(
        name="ada-model", display_name="Ada", litellm_model="openai/ada", owner=author, api_key="sk-ada-own"
    )
    text = page_text(_client(author).get(reverse("model-detail", args=[model.name])).content.decode())
    assert "API basenone: the platform calls the provider's own address" in text


def test_a_run_at_the_owners_endpoint_shows_the_address_to_its_owner_only(
    release, author, other_author, maintainer, client
):
    model = services.model_register(
        name="ada-model",
        display_name="Ada",
        litellm_model="openai/ada",
        owner=author,
        api_key="sk-ada-own",
        api_base=OWN_ENDPOINT,
    )
    run = evaluate(release, model, lambda s: True)
    board = client.get(reverse("leaderboard", args=[release.name])).content.decode()
    assert "owner&#x27;s own endpoint" in board and OWN_ENDPOINT not in board, "the provenance badge says whose"
    assert OWN_ENDPOINT not in json.dumps(client_for().get(f"/api/v1/releases/{release.name}/leaderboard/").json())
    for who, user, sees in (
        ("owner", author, True),
        ("maintainer", maintainer, True),
        ("another user", other_author, False),
        ("a visitor", None, False),
    ):
        page = page_text(_client(user).get(reverse("run-detail", args=[run.pk])).content.decode())
        assert "Called: openai/ada at" in page, who
        assert (OWN_ENDPOINT in page) == sees and ("at the owner's own endpoint" in page) != sees, who
        api = client_for(user)
        endpoint = api.get(f"/api/v1/runs/{run.pk}/").json()["endpoint"]
        assert endpoint["api_base"] == (OWN_ENDPOINT if sees else None), who
        manifest = json.loads(download_body(api.get(f"/api/v1/runs/{run.pk}/manifest/")))
        assert manifest["run"]["endpoint"] == endpoint, who
        assert (OWN_ENDPOINT in json.dumps(manifest)) == sees, who
