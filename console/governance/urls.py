"""Pages of this app; included from console/urls.py."""

from django.urls import path

from console.governance import views

urlpatterns = [
    path("routes/<slug:slug>/policy/", views.route_policy, name="route-policy"),
    path("routes/<slug:slug>/policy/draft/", views.policy_draft, name="policy-draft"),
    path("policies/<int:pk>/", views.policy_record, name="policy-record"),
    path("policies/<int:pk>/record.json", views.policy_record_json, name="policy-record-json"),
    path("policies/<int:pk>/sign/", views.policy_sign, name="policy-sign"),
    path("policies/<int:pk>/recompute-evidence/", views.policy_recompute_evidence, name="policy-recompute-evidence"),
    path("policies/<int:pk>/withdraw/", views.policy_withdraw, name="policy-withdraw"),
]
