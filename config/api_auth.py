"""The API's authentication: DRF's token scheme, with a hint for the common `Bearer` mistake.

Apart from common.api because DRF imports authentication classes while rest_framework.views is still loading."""

from __future__ import annotations

from rest_framework import authentication, exceptions


class TokenAuthentication(authentication.TokenAuthentication):
    """A `Bearer` header is refused with the fix instead of being ignored (the caller would act as anonymous)."""

    def authenticate(self, request):
        scheme = authentication.get_authorization_header(request).split(b" ", 1)[0]
        if scheme.lower() == b"bearer":
            raise exceptions.AuthenticationFailed(
                "the Authorization scheme here is Token, not Bearer: send 'Authorization: Token <your API token>'"
            )
        return super().authenticate(request)
