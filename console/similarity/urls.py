"""Pages of this app; included from console/urls.py."""

from django.urls import path

from console.similarity import views

urlpatterns = [
    path("gaps/", views.gaps, name="gaps"),
    path("gaps/recompute", views.gaps_recompute, name="gaps-recompute"),
    path("gaps.csv", views.gaps_csv, name="gaps-csv"),
    path("gaps/clusters/<int:pk>/", views.gap_cluster, name="gap-cluster"),
]
