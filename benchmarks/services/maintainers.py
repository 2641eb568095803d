"""Who is a maintainer: granting the role, and the check the other services make."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from benchmarks.selectors import (
    user_is_maintainer,
)


def maintainer_require(actor) -> None:
    """`actor` None is the operator on the command line."""
    if actor is not None and not user_is_maintainer(user=actor):
        raise PermissionDenied("only maintainers curate and publish versions")


def maintainer_grant(*, user) -> None:
    """Make `user` a maintainer: they review submissions and curate versions."""
    from django.conf import settings
    from django.contrib.auth.models import Group

    user.groups.add(Group.objects.get_or_create(name=settings.MAINTAINERS_GROUP)[0])


def maintainer_ensure(*, username: str, email: str, password: str) -> tuple[object, bool]:
    """The maintainer account `username`, created with `password` if missing; an existing password is kept,
    so a password changed on the site survives restarts. Returns (user, created)."""
    from django.contrib.auth import get_user_model

    with transaction.atomic():
        user, created = get_user_model().objects.get_or_create(username=username, defaults={"email": email})
        if created:
            user.set_password(password)
            user.save(update_fields=["password"])
        maintainer_grant(user=user)
    return user, created
