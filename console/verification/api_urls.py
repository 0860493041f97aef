"""API v1 endpoints of this app; included from console/api_urls.py."""

from django.urls import path

from console.verification import apis

urlpatterns = [
    path("verify", apis.VerifyApi.as_view(), name="api-verify"),
]
