from django.urls import path

from console.notify import views

urlpatterns = [
    path("outbox/", views.outbox, name="outbox"),
    path("notifications/", views.preferences, name="notify-preferences"),
]
