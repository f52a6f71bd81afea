"""Template filters of the chat pages (``{% load zett_assistants %}``)."""
