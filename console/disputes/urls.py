"""Pages of this app; included from console/urls.py."""

from django.urls import path, re_path

from console.disputes import views

urlpatterns = [
    path("disputes/", views.inbox, name="dispute-inbox"),
    path("disputes/<int:pk>/", views.dispute_detail, name="dispute-detail"),
    path("disputes/<int:pk>/take/", views.dispute_take, name="dispute-take"),
    path("disputes/<int:pk>/resolve/", views.dispute_resolve, name="dispute-resolve"),
    path("decisions/<int:pk>/dispute/", views.dispute_open, name="dispute-open"),
    path("decisions/<int:pk>/appeal-link/revoke/", views.appeal_link_revoke, name="appeal-link-revoke"),
    # A request id may hold slashes; the token never does.
    re_path(
        r"^appeal/(?P<slug>[-a-zA-Z0-9_]+)/(?P<request_id>.+)/(?P<token>[A-Za-z0-9_-]+)$", views.appeal, name="appeal"
    ),
]
