"""A release's pages live under one prefix, /versions/<name>/; the other form, /releases/<name>/ (where the humans,
compare and difficulty pages once were, and the word the navigation uses), answers with a permanent redirect to it,
so no guide, e-mail or saved link breaks. /versions/ was kept: the release, leaderboard and paper pages, the ones
people cite, were already there."""

from django.http import Http404, HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.http.response import HttpResponseRedirectBase
from django.shortcuts import redirect
from django.urls import Resolver404, resolve

CANONICAL = "/versions/"
ALIAS = "/releases/"


class HttpResponsePermanentRedirectKeepingMethod(HttpResponseRedirectBase):
    status_code = 308  # a form posted to the old address is posted again, with its body, to the new one


def _is_page(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


def release_alias(request: HttpRequest, rest: str = "") -> HttpResponse:
    """/releases/<rest> -> /versions/<rest> (query kept) when that is a page; /releases/ is the list, the home page."""
    if not rest:
        return redirect("home", permanent=True)
    info = request.path_info.replace(ALIAS, CANONICAL, 1)
    info = next((p for p in (info, f"{info}/") if _is_page(p)), "")  # the slash appended, as for any address
    if not info:
        raise Http404(f"no release page at {request.path}")
    path = request.path.removesuffix(request.path_info) + info  # the site's script prefix kept
    target = f"{path}?{request.META['QUERY_STRING']}" if request.META.get("QUERY_STRING") else path
    if request.method in ("GET", "HEAD"):
        return HttpResponsePermanentRedirect(target)
    return HttpResponsePermanentRedirectKeepingMethod(target)
