"""Pages of this app; included from console/urls.py."""

from django.urls import path

from console.analysis import views

urlpatterns = [
    path("operating-points/", views.operating_points, name="operating-points"),
    path("operating-points/table.csv", views.operating_points_csv, name="operating-points-csv"),
]
