"""API v1 endpoints of this app; included from console/api_urls.py (the appeal link is listed there,
before the decision lookup whose path would otherwise swallow it)."""

from django.urls import path

from console.disputes import apis

urlpatterns = [
    path("decisions/<int:decision_id>/disputes", apis.DecisionDisputesApi.as_view(), name="api-decision-disputes"),
    path("disputes", apis.DisputeListApi.as_view(), name="api-disputes"),
    path("disputes/<int:dispute_id>", apis.DisputeDetailApi.as_view(), name="api-dispute"),
    path("disputes/<int:dispute_id>/assign", apis.DisputeAssignApi.as_view(), name="api-dispute-assign"),
    path("disputes/<int:dispute_id>/resolve", apis.DisputeResolveApi.as_view(), name="api-dispute-resolve"),
]
