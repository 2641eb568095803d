"""An agent item's trajectory as JSON, under the run pages' addresses."""

from django.urls import path

from agents import views as agent_views

urlpatterns = [
    path(
        "runs/<int:pk>/items/<int:outcome_pk>/trajectory.json", agent_views.trajectory_json, name="run-item-trajectory"
    ),
    path(
        "runs/<int:pk>/items/<int:outcome_pk>/trajectory.atif.json",
        agent_views.trajectory_atif_json,
        name="run-item-trajectory-atif",
    ),
]
