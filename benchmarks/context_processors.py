"""Template context shared by every page."""

from django.http import HttpRequest

from benchmarks.selectors import user_is_maintainer


def roles(request: HttpRequest) -> dict[str, bool]:
    return {"viewer_is_maintainer": user_is_maintainer(user=request.user)}
