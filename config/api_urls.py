"""REST API routes (/api/v1/)."""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from benchmarks import api as releases
from common.api import api_not_found
from evaluation.api import models as model_api
from evaluation.api import results as result_api
from evaluation.api import runs as run_api
from evaluation.api import uploads as upload_api
from humans import api as humans
from leaderboard import api as leaderboard

urlpatterns = [
    path("releases/", releases.ReleaseList.as_view(), name="api-release-list"),
    path("releases/<str:name>/", releases.ReleaseDetail.as_view(), name="api-release-detail"),
    path("releases/<str:name>/downloads/<str:kind>/", releases.ReleaseDownload.as_view(), name="api-release-download"),
    path("releases/<str:name>/items/", releases.ItemList.as_view(), name="api-item-list"),
    path("releases/<str:name>/items/<int:item_id>/", releases.ItemDetail.as_view(), name="api-item-detail"),
    path("releases/<str:name>/leaderboard/", leaderboard.Leaderboard.as_view(), name="api-leaderboard"),
    path(
        "releases/<str:name>/leaderboard.csv",
        leaderboard.Leaderboard.as_view(),
        {"format": "csv"},
        name="api-leaderboard-csv",
    ),
    path("releases/<str:name>/compare/", leaderboard.Compare.as_view(), name="api-compare"),
    path("releases/<str:name>/difficulty/", leaderboard.Difficulty.as_view(), name="api-difficulty"),
    path("releases/<str:name>/humans/", humans.ReleaseHumans.as_view(), name="api-release-humans"),
    path("releases/<str:name>/attempts/", humans.AttemptOpen.as_view(), name="api-attempt-open"),
    path("attempts/<int:pk>/", humans.AttemptDetail.as_view(), name="api-attempt-detail"),
    path("attempts/<int:pk>/submit/", humans.AttemptSubmit.as_view(), name="api-attempt-submit"),
    path("attempts/<int:pk>/pause/", humans.AttemptPause.as_view(), name="api-attempt-pause"),
    path("attempts/<int:pk>/resume/", humans.AttemptResume.as_view(), name="api-attempt-resume"),
    path("attempts/<int:pk>/abandon/", humans.AttemptAbandon.as_view(), name="api-attempt-abandon"),
    path("models/", model_api.ModelList.as_view(), name="api-model-list"),
    path("models/<slug:name>/", model_api.ModelDetail.as_view(), name="api-model-detail"),
    path("runs/", run_api.RunStart.as_view(), name="api-run-start"),
    path("runs/upload/", upload_api.RunUpload.as_view(), name="api-run-upload"),
    path("runs/harbor/", upload_api.RunHarborImport.as_view(), name="api-run-harbor"),
    path("runs/<int:pk>/", run_api.RunDetail.as_view(), name="api-run-detail"),
    path("runs/<int:pk>/cancel/", run_api.RunCancel.as_view(), name="api-run-cancel"),
    path("runs/<int:pk>/resume/", run_api.RunResume.as_view(), name="api-run-resume"),
    path("runs/<int:pk>/results/", result_api.RunResults.as_view(), name="api-run-results"),
    path("runs/<int:pk>/verify/", run_api.RunVerify.as_view(), name="api-run-verify"),
    path("runs/<int:pk>/priority/", run_api.RunPriority.as_view(), name="api-run-priority"),
    path("runs/<int:pk>/manifest/", run_api.RunManifest.as_view(), name="api-run-manifest"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "docs/", SpectacularSwaggerView.as_view(url_name="api-schema", template_name="api_docs.html"), name="api-docs"
    ),
    re_path(r"^(?P<path>.*)$", api_not_found),
]
