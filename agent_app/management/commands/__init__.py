"""``python manage.py <command>`` entry points of the zett app."""
