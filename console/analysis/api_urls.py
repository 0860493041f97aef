"""API v1 endpoints of this app; included from console/api_urls.py."""

from django.urls import path

from console.analysis import apis

urlpatterns = [
    path("routes/<slug:slug>/operating-points", apis.OperatingPointsApi.as_view(), name="api-operating-points"),
    path("routes/<slug:slug>/certified-cutoff", apis.CertifiedCutoffApi.as_view(), name="api-certified-cutoff"),
    path("routes/<slug:slug>/calibration", apis.CalibrationApi.as_view(), name="api-calibration"),
]
