"""Each chat names the assistant it talks to; existing chats get the default assistant."""

from django.db import migrations, models


def bind_existing_chats(apps, schema_editor):
    from agent_app.assistants import registry

    default = registry.default_id()
    if default:
        apps.get_model("agent_app", "ChatSession").objects.filter(assistant="").update(
            assistant=default
        )


class Migration(migrations.Migration):
    dependencies = [("agent_app", "0002_round2_runs_waits_ownership")]

    operations = [
        migrations.AddField(
            model_name="chatsession",
            name="assistant",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunPython(bind_existing_chats, migrations.RunPython.noop),
    ]
