"""Pages of this app; included from console/urls.py."""

from django.urls import path

from console.trials import views

urlpatterns = [
    path("routes/<slug:slug>/trials/", views.trial_list, name="trial-list"),
    path("trials/<int:pk>/", views.trial_detail, name="trial-detail"),
]
