"""A delegate's sub-run keeps its own conversation (``SubRun``)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_app', '0014_people_in_the_loop'),
    ]

    operations = [
        migrations.CreateModel(
            name='SubRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('parent_tool_call_id', models.CharField(max_length=255)),
                ('root_tool_call_id', models.CharField(max_length=255)),
                ('assistant', models.CharField(max_length=64)),
                ('request_id', models.CharField(max_length=64)),
                ('depth', models.PositiveSmallIntegerField(default=1)),
                ('messages', models.JSONField(default=list)),
                ('status', models.CharField(choices=[('running', 'running'), ('completed', 'completed'), ('failed', 'failed')], default='running', max_length=16)),
                ('answer', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sub_runs', to='agent_app.chatsession')),
            ],
            options={
                'ordering': ['created_at'],
                'constraints': [models.UniqueConstraint(fields=('session', 'parent_tool_call_id'), name='one_sub_run_per_call')],
            },
        ),
    ]
