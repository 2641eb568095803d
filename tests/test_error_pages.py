"""With DEBUG off, a missing page and a server error answer with the site's own pages in the base layout."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import include, path


def _broken_view(request):
    raise RuntimeError("boom: a bug in a view")


def _refusing_view(request):
    from django.core.exceptions import PermissionDenied

    raise PermissionDenied("maintainers only")


def _service_refusal_view(request):
    from evaluation.services import RunQuotaExceeded

    raise RunQuotaExceeded("you already have 3 runs queued or running")


def _bug_value_error_view(request):
    raise ValueError("a bug's ValueError, not a refusal")


urlpatterns = [
    path("broken/", _broken_view),
    path("refused/", _refusing_view),
    path("service-refusal/", _service_refusal_view),
    path("value-error/", _bug_value_error_view),
    path("", include("config.urls")),
]


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


# `make run` keeps DEBUG on (scripts/run.sh); its visitors still meet the site's pages, never Django's debug pages.


@pytest.mark.django_db
@pytest.mark.urls("tests.test_error_pages")
@pytest.mark.parametrize("address", ["/no/such/route/", "/versions/no-such-release/"])
def test_with_debug_on_a_missing_page_is_the_sites_not_the_url_list(settings, address):
    settings.DEBUG = True
    response = Client().get(address)
    assert response.status_code == 404
    body = response.content.decode()
    assert "Page not found" in body and 'header class="site"' in body and address in body
    assert "URLconf" not in body and "broken/" not in body  # Django's debug page lists every route


@pytest.mark.django_db
@pytest.mark.urls("tests.test_error_pages")
def test_with_debug_on_a_server_error_is_the_sites_and_the_traceback_is_logged(settings, caplog):
    settings.DEBUG = True
    response = Client(raise_request_exception=False).get("/broken/")
    assert response.status_code == 500
    body = response.content.decode()
    assert "Something went wrong on our side" in body and "boom" not in body and "Traceback" not in body
    assert any(r.exc_info and "boom" in str(r.exc_info[1]) for r in caplog.records)


@pytest.mark.django_db
def test_with_debug_on_a_missing_address_without_its_slash_still_redirects(settings):
    settings.DEBUG = True
    response = Client().get("/leaderboard")
    assert response.status_code == 301 and response["Location"] == "/leaderboard/"


@pytest.mark.django_db
@pytest.mark.urls("tests.test_error_pages")
def test_site_error_pages_off_brings_back_djangos_debug_pages(settings):
    settings.DEBUG, settings.SITE_ERROR_PAGES = True, False
    assert "URLconf" in Client().get("/no/such/route/").content.decode()


@pytest.mark.django_db
@pytest.mark.urls("tests.test_error_pages")
def test_with_debug_on_a_refusal_is_a_403_not_a_server_error(settings):
    """Under `make run` a page refused to the visitor (a non-maintainer on /operations/) rendered the 500 page."""
    settings.DEBUG, settings.SITE_ERROR_PAGES = True, True
    response = Client(raise_request_exception=False).get("/refused/")
    assert response.status_code == 403


@pytest.mark.urls("tests.test_error_pages")
@pytest.mark.django_db
@pytest.mark.parametrize("debug", [False, True])
def test_a_service_refusal_on_a_page_says_it_with_the_status_its_class_declares(settings, debug):
    """ApplicationError is caught once for pages (common.pages): a view that declares no page to go back to answers
    with the refusal's own text and status (RunQuotaExceeded: 429), in the base layout, DEBUG on or off."""
    settings.DEBUG = debug
    response = Client(raise_request_exception=False).get("/service-refusal/")
    assert response.status_code == 429
    body = response.content.decode()
    assert "you already have 3 runs queued or running" in body and 'header class="site"' in body


@pytest.mark.urls("tests.test_error_pages")
@pytest.mark.django_db
def test_a_plain_value_error_stays_a_server_error(settings):
    settings.DEBUG = False
    response = Client(raise_request_exception=False).get("/value-error/")
    assert response.status_code == 500
    assert "a bug's ValueError" not in response.content.decode()
