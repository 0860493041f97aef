"""Pages of this app; included from console/urls.py under /grading/."""

from django.urls import path

from grading import views

urlpatterns = [
    path("", views.grading_queue, name="grading-queue"),
    path("next", views.grading_next, name="grading-next"),
    path("items/<str:item_id>/grade", views.grading_grade, name="grading-grade"),
    path("items/<str:item_id>/skip", views.grading_skip, name="grading-skip"),
    path("items/<str:item_id>/undo", views.grading_undo, name="grading-undo"),
    path("adjudication/", views.adjudication_list, name="grading-adjudication-list"),
    path("adjudication/<str:item_id>/", views.adjudication_item, name="grading-adjudication-item"),
    path("agreement/", views.agreement, name="grading-agreement"),
    path("routes/<slug:slug>/guidelines/", views.guidelines_edit, name="grading-guidelines"),
    path("routes/<slug:slug>/guidelines/preview", views.guidelines_preview, name="grading-guidelines-preview"),
    path("plans/", views.plan_list, name="grading-plans"),
    path("routes/<slug:slug>/plan/", views.plan_edit, name="grading-plan"),
    path("routes/<slug:slug>/plan/retire", views.plan_retire, name="grading-plan-retire"),
    path("routes/<slug:slug>/gold/", views.gold_list, name="grading-gold"),
    path("routes/<slug:slug>/gold/<int:pk>/remove", views.gold_remove, name="grading-gold-remove"),
]
