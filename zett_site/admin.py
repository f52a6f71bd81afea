"""The example site's admin: its notes (the chat app registers its own models)."""

from django.contrib import admin

from zett_site.models import Note


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ["title", "session", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["title", "text"]
    raw_id_fields = ["session"]
