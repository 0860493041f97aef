"""Sign-in through the OpenID provider; 404 while none is configured. Included from console/urls.py."""

from django.urls import path

from console.accounts.identity import views

urlpatterns = [
    path("accounts/oidc/login/", views.oidc_login, name="oidc-login"),
    path("accounts/oidc/callback/", views.oidc_callback, name="oidc-callback"),
    path("accounts/oidc/backchannel-logout/", views.oidc_backchannel_logout, name="oidc-backchannel-logout"),
]
