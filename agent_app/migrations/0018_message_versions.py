"""Turns have versions: each message names the one before it on its path (``follows``),
``position`` becomes its place on that path, and the shown path holds each position once.

Chats stored before keep everything: a turn that was answered again or edited (its old
rows marked superseded, then a new user message written after everything) becomes a turn
with versions, the superseded ones first, the shown one last. A superseded user message
that opened a turn follows the shown message before it; the rest of its rows follow each
other. The shown path is numbered from 0 again; a version's rows continue the numbering
of the message they follow.
"""

from django.db import migrations, models

#: Rows written per ``bulk_update``.
BATCH = 500


def link_paths(apps, schema_editor):
    message = apps.get_model("agent_app", "ChatMessage")
    if schema_editor.connection.vendor == "postgresql":
        # Foreign keys are checked as each update ends, not at commit: PostgreSQL refuses
        # the indexes below while checks of updated rows are pending.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    _link_straight_chats(message, schema_editor)
    branched = (
        message.objects.filter(superseded=True)
        .order_by()
        .values_list("session_id", flat=True)
        .distinct()
    )
    for session_id in list(branched):
        _link_branched_chat(message, session_id)


def _link_straight_chats(message, schema_editor):
    """Each message follows the one before it: one statement for every chat."""
    quote = schema_editor.connection.ops.quote_name
    table, session = quote(message._meta.db_table), quote("session_id")
    schema_editor.execute(
        f"UPDATE {table} SET {quote('follows')} = (SELECT earlier.{quote('id')} "
        f"FROM {table} earlier WHERE earlier.{session} = {table}.{session} "
        f"AND earlier.{quote('position')} < {table}.{quote('position')} "
        f"ORDER BY earlier.{quote('position')} DESC LIMIT 1)"
    )


def _link_branched_chat(message, session_id):
    rows = list(
        message.objects.filter(session_id=session_id)
        .order_by("position")
        .only("pk", "position", "superseded", "role", "steering")
    )
    place: dict[int, int] = {}
    last_shown = previous = None
    for row in rows:
        if not row.superseded:
            parent = last_shown
            last_shown = row
        elif row.role == "user" and not row.steering:
            parent = last_shown  # a superseded turn: a version beside the shown one
        else:
            parent = previous
        row.follows = None if parent is None else parent.pk
        row.position = 0 if parent is None else place[parent.pk] + 1
        place[row.pk] = row.position
        previous = row
    turns: dict[tuple[int | None, int], list] = {}
    for row in rows:
        turns.setdefault((row.follows, row.position), []).append(row)
    for versions in turns.values():
        if len(versions) < 2:
            continue
        versions.sort(key=lambda row: row.pk)
        shown = any(not row.superseded for row in versions)
        for number, row in enumerate(versions, start=1):
            row.version, row.versions = number, len(versions)
            row.chosen = not row.superseded if shown else number == len(versions)
    message.objects.bulk_update(
        rows, ["position", "follows", "version", "versions", "chosen"], batch_size=BATCH
    )


def number_in_order(apps, schema_editor):
    """Back: every message of a chat gets its own position again, in the order written."""
    message = apps.get_model("agent_app", "ChatMessage")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    sessions = message.objects.order_by().values_list("session_id", flat=True).distinct()
    for session_id in list(sessions):
        rows = list(message.objects.filter(session_id=session_id).order_by("pk").only("pk"))
        for place, row in enumerate(rows):
            row.position = place
        message.objects.bulk_update(rows, ["position"], batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [("agent_app", "0017_note_to_the_example_site")]

    operations = [
        migrations.RemoveConstraint(
            model_name="chatmessage", name="unique_message_position_per_session"
        ),
        migrations.AddField(
            model_name="chatmessage",
            name="chosen",
            field=models.BooleanField(default=True, editable=False),
        ),
        migrations.AddField(
            model_name="chatmessage",
            name="follows",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="chatmessage",
            name="version",
            field=models.PositiveIntegerField(default=1, editable=False),
        ),
        migrations.AddField(
            model_name="chatmessage",
            name="versions",
            field=models.PositiveIntegerField(default=1, editable=False),
        ),
        migrations.RunPython(link_paths, number_in_order, elidable=False),
        migrations.AddIndex(
            model_name="chatmessage",
            index=models.Index(fields=["session", "follows"], name="message_session_follows"),
        ),
        migrations.AddConstraint(
            model_name="chatmessage",
            constraint=models.UniqueConstraint(
                condition=models.Q(("superseded", False)),
                fields=("session", "position"),
                name="unique_shown_position_per_session",
            ),
        ),
    ]
