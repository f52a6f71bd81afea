from django.apps import AppConfig


class AgentAppConfig(AppConfig):
    name = "agent_app"
    verbose_name = "Agent chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agent_app import checks  # noqa: F401  (registers the system checks)
