"""Pages of this app; included from console/urls.py."""

from django.urls import path

from console.monitoring import views

urlpatterns = [
    path("routes/<slug:slug>/monitoring/", views.route_monitoring, name="route-monitoring"),
    path("routes/<slug:slug>/rechecks/<int:pk>/", views.recheck_detail, name="monitoring-recheck"),
    path("routes/<slug:slug>/rechecks/<int:pk>/close/", views.recheck_close, name="monitoring-recheck-close"),
    path("routes/<slug:slug>/rechecks/<int:pk>/plan/", views.recheck_plan_adjust, name="monitoring-recheck-plan"),
    path(
        "routes/<slug:slug>/alarms/<int:pk>/acknowledge/", views.alarm_acknowledge, name="monitoring-alarm-acknowledge"
    ),
    path("routes/<slug:slug>/evidence/refresh/", views.evidence_refresh, name="monitoring-evidence-refresh"),
    path("routes/<slug:slug>/monitoring/settings/", views.route_monitoring_settings, name="monitoring-route-settings"),
]
