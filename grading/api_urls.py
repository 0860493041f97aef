"""API v1 endpoints of this app; included from console/api_urls.py."""

from django.urls import path

from grading import apis

urlpatterns = [
    path("grading/next", apis.GradingNextApi.as_view(), name="api-grading-next"),
    path("grading/items/<str:item_id>/grades", apis.GradeCreateApi.as_view(), name="api-grading-grades"),
    path("grading/items/<str:item_id>/skip", apis.SkipApi.as_view(), name="api-grading-skip"),
    path("grading/items/<str:item_id>/adjudication", apis.AdjudicateApi.as_view(), name="api-grading-adjudicate"),
    path("grading/adjudications", apis.AdjudicationListApi.as_view(), name="api-grading-adjudications"),
    path("routes/<slug:slug>/agreement", apis.AgreementApi.as_view(), name="api-grading-agreement"),
    path("routes/<slug:slug>/blindness", apis.BlindnessApi.as_view(), name="api-grading-blindness"),
    path("labels", apis.LabelsImportApi.as_view(), name="api-labels"),
]
