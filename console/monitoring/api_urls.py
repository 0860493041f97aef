"""API v1 endpoints of this app; included from console/api_urls.py."""

from django.urls import path

from console.monitoring import apis

urlpatterns = [
    path("routes/<slug:slug>/health", apis.RouteHealthApi.as_view(), name="api-route-health"),
    path("routes/<slug:slug>/rechecks", apis.RouteRechecksApi.as_view(), name="api-route-rechecks"),
    path("rechecks/<int:recheck_id>", apis.RecheckDetailApi.as_view(), name="api-recheck"),
    path("rechecks/<int:recheck_id>/close", apis.RecheckCloseApi.as_view(), name="api-recheck-close"),
    path("routes/<slug:slug>/alarms", apis.RouteAlarmsApi.as_view(), name="api-route-alarms"),
    path("alarms/<int:alarm_id>/acknowledge", apis.AlarmAcknowledgeApi.as_view(), name="api-alarm-acknowledge"),
]
