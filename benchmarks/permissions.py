"""Who may do what, shared by every app's pages and API: the maintainers' view decorator and the owner-or-maintainer
rule."""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from rest_framework import permissions

from benchmarks.selectors import user_is_maintainer


def maintainer_required(view):
    """Anonymous visitors go to the login page; signed-in non-maintainers get 403."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not user_is_maintainer(user=request.user):
            raise PermissionDenied("maintainers only")
        return view(request, *args, **kwargs)

    return wrapper


class IsOwnerOrMaintainer(permissions.BasePermission):
    """Reads for everyone; changes for the object's owner (the view's `owner_field`) or a maintainer."""

    message = "only the owner or a maintainer may do this"

    def has_object_permission(self, request, view, obj) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        return user_may_change(user=request.user, owner_id=getattr(obj, f"{view.owner_field}_id"))


def user_may_change(*, user, owner_id: int | None) -> bool:
    return bool(user.is_authenticated and (owner_id == user.pk or user_is_maintainer(user=user)))
