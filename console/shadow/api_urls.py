"""API v1 endpoints of this app; included from console/api_urls.py."""

from django.urls import path

from console.shadow import apis

urlpatterns = [
    path("shadow-runs/<int:run_id>/retry", apis.ShadowRunRetryApi.as_view(), name="api-shadow-run-retry"),
]
