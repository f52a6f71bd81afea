"""A delegate's sub-run names the last call it started of a tool that must not run twice,
so a continuation after a crash goes on with the sub-run without running that call again."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agent_app", "0020_run_attempts")]

    operations = [
        migrations.AddField(
            model_name="subrun",
            name="started_call",
            field=models.CharField(blank=True, max_length=255),
        ),
    ]
