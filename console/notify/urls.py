from django.urls import path

from console.notify import views

urlpatterns = [
    path("outbox/", views.outbox, name="outbox"),
]
