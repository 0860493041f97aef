"""The admins' workspace pages and each person's Security page; included from console/urls.py."""

from django.urls import path

from console.accounts import views

urlpatterns = [
    path("workspace/", views.workspace_index, name="workspace"),
    path("workspace/roles/", views.workspace_roles, name="workspace-roles"),
    path("workspace/roles.csv", views.workspace_roles_csv, name="workspace-roles-csv"),
    path("routes/new/", views.route_new, name="route-new"),
    path("routes/<slug:slug>/settings/", views.route_settings, name="route-settings"),
    path("routes/<slug:slug>/members/", views.route_members, name="route-members"),
    path("routes/<slug:slug>/members/<int:pk>/revoke/", views.route_member_revoke, name="route-member-revoke"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token-revoke"),
    path("tokens/<int:pk>/rate/", views.token_rate, name="token-rate"),
    path("accounts/security/", views.account_security, name="account-security"),
    path("accounts/security/sessions/<int:pk>/end/", views.account_session_end, name="account-session-end"),
    path(
        "accounts/security/sessions/end-others/", views.account_sessions_end_others, name="account-sessions-end-others"
    ),
    path("accounts/security/tokens/<int:pk>/revoke/", views.account_token_revoke, name="account-token-revoke"),
]
