from django.urls import include, path, re_path

from audit import apis as audit_apis
from console.core.api import api_not_found
from console.disputes import apis as disputes_apis
from console.ledger import apis as ledger_apis
from console.review import apis as review_apis

urlpatterns = [
    path("decisions", ledger_apis.DecisionIngestApi.as_view(), name="api-decisions"),
    path("decisions/<int:decision_id>", review_apis.DecisionDetailApi.as_view(), name="api-decision"),
    path("routes", ledger_apis.RouteListApi.as_view(), name="api-routes"),
    path("routes/<slug:slug>/settings", ledger_apis.RouteAnswerSettingsApi.as_view(), name="api-route-settings"),
    path("routes/<slug:slug>/decisions", ledger_apis.RouteDecisionListApi.as_view(), name="api-route-decisions"),
    path(
        "routes/<slug:slug>/decisions/<path:request_id>/appeal-link",
        disputes_apis.AppealLinkApi.as_view(),
        name="api-appeal-link",
    ),
    path(
        "routes/<slug:slug>/decisions/<path:request_id>",
        review_apis.DecisionByRequestApi.as_view(),
        name="api-decision-by-request",
    ),
    path("audit/events", audit_apis.AuditEventListApi.as_view(), name="api-audit-events"),
    path("audit/verify", audit_apis.AuditVerifyApi.as_view(), name="api-audit-verify"),
    path("audit/export", audit_apis.AuditExportApi.as_view(), name="api-audit-export"),
    path("", include("console.verification.api_urls")),
    path("", include("console.shadow.api_urls")),
    path("", include("grading.api_urls")),
    path("", include("console.analysis.api_urls")),
    path("", include("console.trials.api_urls")),
    path("", include("console.governance.api_urls")),
    path("", include("console.similarity.api_urls")),
    path("", include("console.disputes.api_urls")),
    path("", include("console.monitoring.api_urls")),
    re_path(r"^.*$", api_not_found),
]
