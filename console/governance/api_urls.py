"""API v1 endpoints of this app; included from console/api_urls.py."""

from django.urls import path

from console.governance import apis

urlpatterns = [
    path("routes/<slug:slug>/policies", apis.RoutePoliciesApi.as_view(), name="api-route-policies"),
    path("routes/<slug:slug>/policy", apis.RoutePolicyApi.as_view(), name="api-route-policy"),
    path("policies/<int:policy_id>", apis.PolicyDetailApi.as_view(), name="api-policy"),
    path("policies/<int:policy_id>/sign", apis.PolicySignApi.as_view(), name="api-policy-sign"),
    path(
        "policies/<int:policy_id>/recompute-evidence",
        apis.PolicyRecomputeEvidenceApi.as_view(),
        name="api-policy-recompute-evidence",
    ),
    path(
        "policies/<int:policy_id>/evidence-check",
        apis.PolicyEvidenceCheckApi.as_view(),
        name="api-policy-evidence-check",
    ),
    path("policies/<int:policy_id>/withdraw", apis.PolicyWithdrawApi.as_view(), name="api-policy-withdraw"),
]
