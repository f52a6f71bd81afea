from django.apps import AppConfig


class AgentAppConfig(AppConfig):
    name = "agent_app"
    verbose_name = "Agent chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        # Registers the system checks, and (access) the sign-in/sign-out and deletion receivers.
        from agent_app import checks  # noqa: F401
        from agent_app.assistants import registry
        from agent_app.durable.store import message_saved_through_the_orm
        from agent_app.guard import access  # noqa: F401
        from agent_app.models import ChatMessage

        # Every installed app's assistants module, and ZETT_ASSISTANTS: a bad declaration
        # (no id, one id twice) stops the start with the class named.
        registry.discover()
        post_save.connect(
            message_saved_through_the_orm, sender=ChatMessage, dispatch_uid="zett-history-version"
        )
