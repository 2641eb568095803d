"""The view decorator for maintainers' pages, shared by every app."""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

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
