"""WSGI entry point for plain-HTTP hosting (pages and admin only: no websockets)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")

application = get_wsgi_application()
