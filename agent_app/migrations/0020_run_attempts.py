"""A run counts the workers that ran it (a continuation after a crash is one more) and
names the last call it started of a tool that must not run twice."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agent_app", "0019_pageless_runs")]

    operations = [
        migrations.AddField(
            model_name="chatrun",
            name="attempts",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="chatrun",
            name="started_call",
            field=models.CharField(blank=True, max_length=64),
        ),
    ]
