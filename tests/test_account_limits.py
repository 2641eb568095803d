"""Guessing passwords and flooding sign-up or reset mails is contained: per account and per client address."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import authenticate
from django.test import Client
from django.urls import reverse
from django.utils import timezone

pytestmark = pytest.mark.django_db

ATTACKER, OTHER = "203.0.113.7", "198.51.100.20"


def sign_in(username: str, password: str, *, ip: str) -> tuple[int, str, bool]:
    """Post the sign-in form from `ip`; (status, page text, signed in?)."""
    client = Client(REMOTE_ADDR=ip)
    response = client.post(reverse("login"), {"username": username, "password": password})
    return response.status_code, " ".join(response.content.decode().split()), "_auth_user_id" in client.session


def test_thirty_wrong_passwords_lock_the_account_for_a_while_and_no_one_else(settings, author, other_author):
    assert settings.AXES_FAILURE_LIMIT <= 30
    statuses = [sign_in("ada", f"wrong-{n}", ip=ATTACKER)[0] for n in range(30)]
    assert statuses[: settings.AXES_FAILURE_LIMIT - 1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)  # the form again
    assert set(statuses[settings.AXES_FAILURE_LIMIT :]) == {429}

    status, page, signed_in = sign_in("ada", "pw-ada-12345", ip=ATTACKER)  # the right password, still refused
    assert (status, signed_in) == (429, False)
    assert "Too many failed sign-ins for this account or from your address" in page
    assert "locked for 15 minutes, even with the right password" in page
    assert sign_in("ada", "pw-ada-12345", ip=OTHER)[2] is False, "locked per account, from any address"
    assert sign_in("bob", "pw-bob-12345", ip=ATTACKER)[2] is False, "and per address, for any account"
    assert sign_in("bob", "pw-bob-12345", ip=OTHER)[2] is True, "other accounts from other addresses sign in"

    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))  # the cool-off passes
    assert sign_in("ada", "pw-ada-12345", ip=ATTACKER)[2] is True


def test_a_few_typos_do_not_lock_and_a_success_starts_the_count_again(settings, author):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in("ada", "typo", ip=ATTACKER)
    assert sign_in("ada", "pw-ada-12345", ip=ATTACKER)[2] is True
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in("ada", "typo", ip=ATTACKER)
    assert sign_in("ada", "pw-ada-12345", ip=ATTACKER)[2] is True


def test_the_admin_sign_in_is_locked_too(settings, admin):
    client = Client(REMOTE_ADDR=ATTACKER)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/admin/login/", {"username": "root", "password": "wrong"})
    response = client.post("/admin/login/", {"username": "root", "password": "pw-root-12345"})
    assert response.status_code == 429 and "_auth_user_id" not in client.session


def test_behind_the_proxy_the_address_is_the_hop_the_proxy_added(settings, author, other_author):
    settings.BEHIND_TLS_PROXY = True
    for n in range(settings.AXES_FAILURE_LIMIT):  # the client invents a new first hop every time
        Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, {ATTACKER}").post(
            reverse("login"), {"username": "bob", "password": "wrong"}
        )
    client = Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=f"192.0.2.99, {ATTACKER}")
    client.post(reverse("login"), {"username": "ada", "password": "pw-ada-12345"})
    assert "_auth_user_id" not in client.session, "the attacker's address is locked whatever it claims"
    client = Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=OTHER)
    client.post(reverse("login"), {"username": "ada", "password": "pw-ada-12345"})
    assert "_auth_user_id" in client.session, "another client behind the same proxy is not"


def test_server_side_authenticate_without_a_request_still_works(author):
    assert authenticate(username="ada", password="pw-ada-12345") == author


def _signup(client: Client, n: int, email: str) -> int:
    return client.post(
        reverse("signup"),
        {"username": f"user{n}", "email": email, "password1": "a-long-pass-9x", "password2": "a-long-pass-9x"},
    ).status_code


def test_signups_are_limited_per_address(settings):
    settings.SIGNUP_RATE = "3/h"
    client = Client(REMOTE_ADDR=ATTACKER)
    assert [_signup(client, n, f"u{n}@example.org") for n in range(4)] == [302, 302, 302, 429]
    assert "too many sign-ups" in client.post(reverse("signup"), {}).content.decode()
    assert _signup(Client(REMOTE_ADDR=OTHER), 9, "u9@example.org") == 302


def test_password_reset_mails_are_limited_per_address_and_per_account(settings, author, mailoutbox):
    settings.PASSWORD_RESET_RATE = "2/h"
    statuses = [
        Client(REMOTE_ADDR=f"198.51.100.{n}").post(reverse("password_reset"), {"email": "ADA@example.org"}).status_code
        for n in range(3)
    ]
    assert statuses == [302, 302, 429] and len(mailoutbox) == 2, "per account, from any address"
    flood = Client(REMOTE_ADDR=ATTACKER)
    statuses = [flood.post(reverse("password_reset"), {"email": f"x{n}@example.org"}).status_code for n in range(3)]
    assert statuses == [302, 302, 429], "per address, for any account"
    assert (
        "too many password reset requests"
        in flood.post(reverse("password_reset"), {"email": "y@example.org"}).content.decode()
    )
