from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agent_app", "0006_token_usage")]

    operations = [
        migrations.AddField(
            model_name="chatrun",
            name="trace_context",
            field=models.CharField(blank=True, max_length=64),
        ),
    ]
