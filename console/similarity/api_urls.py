"""API v1 endpoints of this app; included from console/api_urls.py."""

from django.urls import path

from console.similarity import apis

urlpatterns = [
    path("decisions/<int:decision_id>/similar", apis.SimilarDecisionsApi.as_view(), name="api-decision-similar"),
    path("routes/<slug:slug>/gaps", apis.RouteGapsApi.as_view(), name="api-route-gaps"),
]
