from django.apps import AppConfig


class AgentAppConfig(AppConfig):
    name = "agent_app"
    verbose_name = "Agent chat"
    default_auto_field = "django.db.models.BigAutoField"
