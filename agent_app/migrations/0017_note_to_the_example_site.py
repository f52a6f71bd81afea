"""The demo's ``Note`` leaves the chat app for the example site (``zett_site.Note``).

State only: the table ``agent_app_note`` stays, so the example site's notes are kept (its
model adopts the table by name); a project that installs zett is left with an empty
table nothing uses and no notes in its admin.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("agent_app", "0016_sub_runs")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Note")], database_operations=[]
        )
    ]
