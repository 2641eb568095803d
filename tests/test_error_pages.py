"""With DEBUG off, a missing page and a server error answer with the site's own pages in the base layout."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import include, path


def _broken_view(request):
    raise RuntimeError("boom: a bug in a view")


urlpatterns = [path("broken/", _broken_view), path("", include("config.urls"))]


@pytest.mark.django_db
def test_missing_page_is_friendly_and_keeps_the_navigation(client, settings):
    settings.DEBUG = False
    response = client.get("/versions/no-such-release/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "Page not found" in body and "/versions/no-such-release/" in body
    assert 'header class="site"' in body and 'href="/leaderboard/"' in body


@pytest.mark.django_db
def test_missing_page_escapes_the_address(client, settings):
    settings.DEBUG = False
    response = client.get("/versions/<script>alert(1)</script>/x/")
    assert response.status_code == 404
    assert "<script>alert(1)" not in response.content.decode()


@pytest.mark.django_db
@pytest.mark.urls("tests.test_error_pages")
def test_server_error_is_friendly_and_hides_the_traceback(settings):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    response = client.get("/broken/")
    assert response.status_code == 500
    body = response.content.decode()
    assert "Something went wrong on our side" in body and 'header class="site"' in body
    assert "boom" not in body and "Traceback" not in body
