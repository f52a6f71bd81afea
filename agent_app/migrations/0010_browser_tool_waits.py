"""A stored wait can be a host-page tool's call (``browser_tool``)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agent_app", "0009_chat_attachments")]

    operations = [
        migrations.AlterField(
            model_name="replywait",
            name="kind",
            field=models.CharField(
                choices=[
                    ("ask_user", "question"),
                    ("approval", "approval"),
                    ("browser_tool", "browser tool"),
                ],
                max_length=16,
            ),
        ),
    ]
