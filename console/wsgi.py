import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_wsgi_application()
# Import every view now rather than on the first request: under `gunicorn --preload` (console/run.py)
# this happens once in the master, and the forked workers share those pages instead of each importing them.
_views = get_resolver().url_patterns
