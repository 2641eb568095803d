"""The site's money format as a template filter (`{{ cost|usd }}`); the rule itself is `common.money.usd`."""

from __future__ import annotations

from django import template

from common.money import usd

register = template.Library()
register.filter("usd", usd)
