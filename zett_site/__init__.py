"""The Django project that serves zett: settings, URL and ASGI routing."""
