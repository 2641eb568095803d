"""site_init, run by the web container on every start: the demo release and the first maintainer, once."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from benchmarks.models import BenchmarkVersion
from benchmarks.selectors import user_is_maintainer

pytestmark = pytest.mark.django_db


@pytest.fixture
def site_env(monkeypatch, media_root):
    monkeypatch.setenv("DEMO_RELEASE", "demo-1.0.0")
    monkeypatch.setenv("MAINTAINER_USERNAME", "ops")
    monkeypatch.setenv("MAINTAINER_EMAIL", "ops@example.org")
    monkeypatch.setenv("MAINTAINER_PASSWORD", "first-password-123")
    return monkeypatch


def test_first_start_loads_the_demo_release_and_creates_the_maintainer(site_env):
    call_command("site_init")
    version = BenchmarkVersion.objects.get(name="demo-1.0.0")
    assert version.status == BenchmarkVersion.Status.PUBLISHED and version.tasks.count() == 3
    user = get_user_model().objects.get(username="ops")
    assert user.email == "ops@example.org" and user.check_password("first-password-123")
    assert user_is_maintainer(user=user)


def test_later_starts_change_nothing_and_keep_a_changed_password(site_env):
    call_command("site_init")
    user = get_user_model().objects.get(username="ops")
    user.set_password("changed-on-the-site-456")
    user.save()
    manifest = BenchmarkVersion.objects.get(name="demo-1.0.0").manifest_hash
    call_command("site_init")
    user.refresh_from_db()
    assert user.check_password("changed-on-the-site-456")
    assert BenchmarkVersion.objects.get(name="demo-1.0.0").manifest_hash == manifest
    assert get_user_model().objects.filter(username="ops").count() == 1


def test_no_demo_and_no_maintainer_when_unset(site_env):
    site_env.setenv("DEMO_RELEASE", "")
    site_env.delenv("MAINTAINER_USERNAME")
    call_command("site_init")
    assert not BenchmarkVersion.objects.filter(name="demo-1.0.0").exists()
    assert not get_user_model().objects.filter(username="ops").exists()


def test_a_short_maintainer_password_is_refused_with_the_variable_named(site_env):
    site_env.setenv("MAINTAINER_PASSWORD", "short")
    with pytest.raises(CommandError, match="MAINTAINER_PASSWORD"):
        call_command("site_init")
    assert not get_user_model().objects.filter(username="ops").exists()
