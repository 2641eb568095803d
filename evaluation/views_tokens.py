"""The page where a user creates or revokes their REST API token; a new token is shown once."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token


@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request: HttpRequest) -> HttpResponse:
    user = request.user
    assert isinstance(user, User)  # login_required
    token = Token.objects.filter(user=user).first()
    if request.method == "POST" and request.POST.get("action") == "create":
        if token:
            token.delete()
        # Rendered in this response only: the page never shows the key again.
        new_token = Token.objects.create(user=user)
        return render(request, "account/tokens.html", {"token": new_token, "new_key": new_token.key})
    if request.method == "POST" and request.POST.get("action") == "revoke":
        if token:
            token.delete()
            messages.success(request, "Your API token was revoked; requests using it are now refused.")
        return redirect("api-tokens")
    return render(request, "account/tokens.html", {"token": token, "new_key": None})
