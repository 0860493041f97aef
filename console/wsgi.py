import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_wsgi_application()

# Import the URLconf, and with it every view and the statistics libraries, at load time: under
# `gunicorn --preload` (console/run.py) that happens once before the workers fork, not on each
# worker's first request.
from django.urls import get_resolver  # noqa: E402

_ = get_resolver().url_patterns
