"""MCP questions are stored as ``ask_user`` waits (their payload says ``source: "mcp"``).

An earlier draft of this migration added a wait kind of their own, ``elicitation``; a
database that applied it gets its rows moved to ``ask_user`` here, and any other database
is left as it is (the kind's choices are the same as before).
"""

from django.db import migrations, models


def elicitation_rows_to_ask_user(apps, schema_editor):
    ReplyWait = apps.get_model("agent_app", "ReplyWait")
    for wait in ReplyWait.objects.filter(kind="elicitation"):
        payload = dict(wait.payload or {})
        payload.setdefault("question", payload.get("message", ""))
        payload.update(source="mcp", response_event="ask_user_response")
        wait.kind, wait.event_name, wait.response_event = "ask_user", "ask_user", "ask_user_response"
        wait.payload = payload
        wait.save(update_fields=["kind", "event_name", "response_event", "payload"])


class Migration(migrations.Migration):
    dependencies = [("agent_app", "0007_run_trace_context")]

    operations = [
        migrations.AlterField(
            model_name="replywait",
            name="kind",
            field=models.CharField(
                choices=[("ask_user", "question"), ("approval", "approval")], max_length=16
            ),
        ),
        migrations.RunPython(elicitation_rows_to_ask_user, migrations.RunPython.noop),
    ]
