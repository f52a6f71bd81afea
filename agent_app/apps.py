from django.apps import AppConfig


class AgentAppConfig(AppConfig):
    name = "agent_app"
    verbose_name = "Agent chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_save, pre_save

        # Registers the system checks, and (access) the sign-in/sign-out and deletion receivers.
        from agent_app import checks, production_checks  # noqa: F401
        from agent_app.agents.factory import describe_wait
        from agent_app.assistants import registry
        from agent_app.attachments import stored  # noqa: F401  (files leave with their rows)
        from agent_app.background.host import register_loops
        from agent_app.durable import recovery
        from agent_app.durable.store import message_linked, message_saved_through_the_orm
        from agent_app.guard import access, bodies
        from agent_app.models import ChatMessage

        # The handoff tool announces through the session it runs in (``people.hub``).
        from agent_app.sessions import (
            backpressure,
            daphne_exit,
            people,  # noqa: F401
        )
        from agent_app.sessions.registry import sockets_here
        from agent_app.telemetry import access_log
        from agent_app.webhooks.people_events import connect_people_signals

        # Every installed app's assistants module, and ZETT_ASSISTANTS: a bad declaration
        # (no id, one id twice) stops the start with the class named.
        registry.discover()
        register_loops()  # webhook deliveries and schedules, for every worker's background
        recovery.describe_waits_with(describe_wait)  # the agent tells a dead run's waits
        access.find_sockets_with(sockets_here)  # a deleted chat's sockets here are closed
        connect_people_signals()  # a handoff and a new rating send their webhook events
        daphne_exit.mend()  # before a daphne server runs: its SIGTERM cancels every socket
        bodies.guard()  # daphne refuses zett's too large or stalled bodies before reading them
        backpressure.expose_http_transports()  # event streams measure what is left unread
        access_log.quiet_queries()  # daphne's access log shows no query strings
        post_save.connect(
            message_saved_through_the_orm, sender=ChatMessage, dispatch_uid="zett-history-version"
        )
        pre_save.connect(message_linked, sender=ChatMessage, dispatch_uid="zett-message-follows")
