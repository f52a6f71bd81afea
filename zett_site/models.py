"""The example site's own data: the notes its demo assistant's ``save_note`` tool writes.

Not part of the chat app: a project that installs zett gets no notes table in its admin.
The table keeps the name it had when the model lived in ``agent_app`` (``agent_app_note``),
so existing databases keep their notes.
"""

from __future__ import annotations

from django.db import models


class Note(models.Model):
    """A note the demo assistant writes once the user approved it."""

    session = models.ForeignKey(
        "agent_app.ChatSession",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="notes",
    )
    title = models.CharField(max_length=200)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_app_note"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title
