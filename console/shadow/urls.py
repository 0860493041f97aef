"""Pages of this app; included from console/urls.py."""

from django.urls import path

from console.shadow import views

urlpatterns = [
    path("shadow-runs/<int:pk>/retry/", views.shadow_run_retry, name="shadow-run-retry"),
]
