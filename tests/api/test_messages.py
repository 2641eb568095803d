"""API errors that say how to fix the request: a wrong release name lists the releases that exist (never a draft),
and a `Bearer` Authorization header is refused with the hint that the scheme is `Token`."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from benchmarks.services.curation import version_draft_create
from evaluation import services

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/releases/1.0.1/",
        "/api/v1/releases/1.0.1/items/",
        "/api/v1/releases/1.0.1/leaderboard/",
        "/api/v1/releases/1.0.1/downloads/items/",
    ],
)
def test_unknown_release_in_the_address_lists_the_releases(clients, release, maintainer, path):
    version_draft_create(name="2.0.0", actor=maintainer)
    for caller in ("anonymous", "maintainer"):
        response = clients[caller].get(path)
        assert response.status_code == 404
        error = response.json()["error"]
        assert error["code"] == "not_found"
        assert error["message"] == "no release '1.0.1'; releases: 1.0.0"


def test_a_draft_is_not_a_release_and_is_not_named(clients, release, maintainer):
    version_draft_create(name="2.0.0", actor=maintainer)
    message = clients["maintainer"].get("/api/v1/releases/2.0.0/").json()["error"]["message"]
    assert message == "no release '2.0.0'; releases: 1.0.0"


def test_unknown_release_with_none_published_says_so(clients, db):
    assert clients["anonymous"].get("/api/v1/releases/1.0.0/").json()["error"]["message"] == (
        "no release '1.0.0': no release is published yet"
    )


def test_unknown_release_in_a_run_request_lists_the_releases(clients, release, author):
    services.model_register(
        name="mine", display_name="Mine", litellm_model="openai/mine", owner=author, api_key="sk-mine"
    )
    response = clients["owner"].post("/api/v1/runs/", {"model": "mine", "release": "1.0"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"]["release"] == ["no release '1.0'; releases: 1.0.0"]


def test_a_release_of_the_wrong_type_keeps_the_plain_error(clients, release, author):
    services.model_register(
        name="mine", display_name="Mine", litellm_model="openai/mine", owner=author, api_key="sk-mine"
    )
    response = clients["owner"].post("/api/v1/runs/", {"model": "mine", "release": ["1.0.0"]}, format="json")
    assert response.status_code == 400 and "releases:" not in str(response.json()["error"]["details"]["release"])


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
def test_bearer_header_gets_the_token_hint(author, release, scheme):
    key = Token.objects.create(user=author).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    for response in (client.get("/api/v1/releases/"), client.post("/api/v1/runs/", {}, format="json")):
        assert response.status_code == 401
        assert response.json()["error"]["message"] == (
            "the Authorization scheme here is Token, not Bearer: send 'Authorization: Token <your API token>'"
        )
        assert response["WWW-Authenticate"] == "Token"


def test_the_token_scheme_still_signs_in(author, release):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=author).key}")
    assert client.get("/api/v1/models/").status_code == 200
    assert client.post("/api/v1/runs/", {}, format="json").status_code == 400  # signed in: the body is checked
