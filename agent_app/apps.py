from django.apps import AppConfig


class AgentAppConfig(AppConfig):
    name = "agent_app"
    verbose_name = "Agent chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the sign-in/sign-out receivers and the system checks.
        from agent_app import access, checks  # noqa: F401
