"""REST API routes (/api/v1/)."""

urlpatterns: list = []
