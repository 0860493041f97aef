"""API v1 endpoints of this app; included from console/api_urls.py."""

from django.urls import path

from console.trials import apis

urlpatterns = [
    path("routes/<slug:slug>/gate-trials", apis.GateTrialStartApi.as_view(), name="api-gate-trials"),
    path("gate-trials/<int:trial_id>", apis.GateTrialApi.as_view(), name="api-gate-trial"),
]
