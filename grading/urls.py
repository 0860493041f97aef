"""Pages of this app; included from console/urls.py."""

urlpatterns: list = []
