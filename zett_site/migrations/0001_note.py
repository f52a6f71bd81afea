"""The example site's ``Note``, adopting the table the chat app created for it
(``agent_app_note``, see ``agent_app/migrations/0017_note_to_the_example_site.py``)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [("agent_app", "0017_note_to_the_example_site")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Note",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("title", models.CharField(max_length=200)),
                        ("text", models.TextField()),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "session",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="notes",
                                to="agent_app.chatsession",
                            ),
                        ),
                    ],
                    options={"db_table": "agent_app_note", "ordering": ["-created_at"]},
                )
            ],
            database_operations=[],
        )
    ]
