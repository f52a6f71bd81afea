# Background runs, schedules and webhooks.

import agent_app.webhooks.models
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_app', '0018_message_versions'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Webhook',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('url', models.URLField(max_length=2000)),
                ('events', models.JSONField(default=list)),
                ('secret', models.CharField(default=agent_app.webhooks.models.new_secret, max_length=200)),
                ('active', models.BooleanField(default=True)),
                ('description', models.CharField(blank=True, max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['pk'],
            },
        ),
        migrations.CreateModel(
            name='ScheduledRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(blank=True, max_length=200)),
                ('assistant', models.CharField(max_length=64)),
                ('prompt', models.TextField()),
                ('cron', models.CharField(help_text='minute hour day month weekday', max_length=100)),
                ('timezone', models.CharField(default='UTC', help_text='An IANA name', max_length=64)),
                ('new_chat', models.BooleanField(default=True)),
                ('enabled', models.BooleanField(default=True)),
                ('next_fire_at', models.DateTimeField(blank=True, db_index=True, null=True)),
                ('last_fired_at', models.DateTimeField(blank=True, null=True)),
                ('last_request_id', models.CharField(blank=True, max_length=64)),
                ('last_error', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('chat', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='agent_app.chatsession')),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='zett_schedules', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'scheduled run',
                'ordering': ['pk'],
            },
        ),
        migrations.CreateModel(
            name='WebhookDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('message_id', models.CharField(db_index=True, max_length=64)),
                ('event_type', models.CharField(max_length=64)),
                ('body', models.TextField()),
                ('created_at', models.DateTimeField()),
                ('status', models.CharField(choices=[('pending', 'pending'), ('delivered', 'delivered'), ('failed', 'failed')], default='pending', max_length=16)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField()),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('last_status', models.PositiveIntegerField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True)),
                ('log', models.JSONField(blank=True, default=list)),
                ('webhook', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='agent_app.webhook')),
            ],
            options={
                'verbose_name_plural': 'webhook deliveries',
                'ordering': ['-created_at', '-pk'],
                'indexes': [models.Index(fields=['status', 'next_attempt_at'], name='webhook_delivery_due')],
            },
        ),
    ]
