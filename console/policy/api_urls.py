"""API v1 endpoints of this app; included from console/api_urls.py."""

urlpatterns: list = []
