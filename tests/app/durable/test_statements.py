"""The single-statement writes (``agent_app.models.statements``) store what the ORM would."""

from __future__ import annotations

import contextlib
import datetime as dt
import warnings

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from agent_app.models import ChatSession, ExternalEventRecord, ReplyWait, WaitKind, WaitStatus
from agent_app.models.statements import ALL, ONE, get_joined, insert, pk_exists, run, update

pytestmark = pytest.mark.django_db


def _wait(session: ChatSession, call: str, status: WaitStatus) -> ReplyWait:
    return ReplyWait.objects.create(
        session=session,
        request_id="r1",
        tool_call_id=call,
        tool_name="ask_user",
        kind=WaitKind.ASK_USER,
        event_name="ask_user",
        payload={"tool_call_id": call},
        status=status,
    )


def test_insert_returns_the_ids_and_stores_the_fields_as_the_orm_does():
    session = ChatSession.objects.create()
    rows = [
        ExternalEventRecord(
            session_id=str(session.pk),
            request_id="r1",
            name="ask_user_response",
            correlation_id=f"call-{n}",
            payload={"tool_call_id": f"call-{n}", "answer": 'ünïcode "quoted"', "n": n},
            accepted_by=None,
        )
        for n in range(3)
    ]
    insert(rows, returning_pk=True)
    stored = {row.pk: row for row in ExternalEventRecord.objects.filter(session=session)}
    assert sorted(stored) == sorted(row.pk for row in rows)
    for row in rows:
        again = stored[row.pk]
        assert again.correlation_id == row.correlation_id
        assert again.payload == row.payload
        assert again.received_at == row.received_at  # auto_now_add, set by pre_save
    # ``None`` is SQL NULL, as with ``create``: the "verdict not known yet" query finds it.
    assert (
        ExternalEventRecord.objects.filter(session=session, accepted_by__isnull=True).count() == 3
    )


def test_insert_without_returning_leaves_the_id_unset():
    session = ChatSession.objects.create()
    row = ExternalEventRecord(session=session, name="steering_message", payload={})
    insert([row])
    assert row.pk is None
    assert ExternalEventRecord.objects.get(session=session).name == "steering_message"


def test_insert_of_nothing_sends_no_statement(django_assert_num_queries):
    with django_assert_num_queries(0):
        insert([], returning_pk=True)


def test_update_changes_only_the_rows_every_condition_matches():
    session, other = ChatSession.objects.create(), ChatSession.objects.create()
    open_wait = _wait(session, "c1", WaitStatus.OPEN)
    executing = _wait(session, "c2", WaitStatus.EXECUTING)
    elsewhere = _wait(other, "c1", WaitStatus.OPEN)
    moment = dt.datetime(2026, 12, 1, 3, 4, 5, tzinfo=dt.UTC)

    changed = update(
        ReplyWait,
        {"status": WaitStatus.ANSWERED, "reply": {"answer": "yes"}, "answered_at": moment},
        session=str(session.pk),
        tool_call_id="c1",
        status__in=(WaitStatus.OPEN,),
    )

    assert changed == 1
    open_wait.refresh_from_db()
    assert (open_wait.status, open_wait.reply, open_wait.answered_at) == (
        WaitStatus.ANSWERED,
        {"answer": "yes"},
        moment,
    )
    for untouched, status in ((executing, WaitStatus.EXECUTING), (elsewhere, WaitStatus.OPEN)):
        untouched.refresh_from_db()
        assert untouched.status == status and untouched.reply is None


def test_update_with_a_status_the_row_is_not_in_changes_nothing():
    session = ChatSession.objects.create()
    wait = _wait(session, "c1", WaitStatus.EXECUTING)
    assert (
        update(
            ReplyWait,
            {"status": WaitStatus.ANSWERED},
            session=session.pk,
            tool_call_id="c1",
            status__in=(WaitStatus.OPEN,),
        )
        == 0
    )
    wait.refresh_from_db()
    assert wait.status == WaitStatus.EXECUTING


def test_update_with_an_empty_in_list_matches_no_row(django_assert_num_queries):
    session = ChatSession.objects.create()
    _wait(session, "c1", WaitStatus.OPEN)
    with django_assert_num_queries(0):
        assert (
            update(ReplyWait, {"status": WaitStatus.DONE}, session=session.pk, status__in=()) == 0
        )
    assert ReplyWait.objects.get(session=session).status == WaitStatus.OPEN


def _same_instance(fast: object, plain: object) -> None:
    assert type(fast) is type(plain)
    for field in type(plain)._meta.concrete_fields:
        assert getattr(fast, field.attname) == getattr(plain, field.attname), field.name
    assert fast._state.db == plain._state.db and fast._state.adding is plain._state.adding


def test_get_joined_reads_the_row_and_its_relation_as_select_related_does(
    django_assert_num_queries,
):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("ada", "ada@example.com", "pw", first_name="Ada")
    owned = ChatSession.objects.create(owner=user, title="ünï 'q'", assistant="demo")
    anonymous = ChatSession.objects.create(browser_key="b" * 32)
    for chat in (owned, anonymous):
        plain = ChatSession.objects.select_related("owner").get(pk=chat.pk)
        with django_assert_num_queries(1):
            fast = get_joined(ChatSession, "owner", str(chat.pk))
            owner = fast.owner  # cached with the row: no query of its own
        _same_instance(fast, plain)
        if plain.owner is None:
            assert owner is None
        else:
            _same_instance(owner, plain.owner)
            assert owner.check_password("pw")
    with pytest.raises(ChatSession.DoesNotExist):
        get_joined(ChatSession, "owner", "00000000-0000-0000-0000-000000000000")


def test_get_joined_by_another_field_reads_one_row_and_leaves_non_unique_ones_to_the_orm(
    django_assert_num_queries,
):
    from django.contrib.auth import get_user_model

    from agent_app.models import ApiToken

    user = get_user_model().objects.create_user("lin", password="pw")
    token = ApiToken.objects.create(user=user, name="t", key_hash="h" * 64, prefix="p")
    with django_assert_num_queries(1):
        fast = get_joined(ApiToken, "user", "h" * 64, by="key_hash")
        assert fast.user.username == "lin"
    _same_instance(fast, ApiToken.objects.get(pk=token.pk))
    with pytest.raises(ApiToken.DoesNotExist):
        get_joined(ApiToken, "user", "x" * 64, by="key_hash")
    chat = ChatSession.objects.create(owner=user, title="only one", assistant="demo")
    assert get_joined(ChatSession, "owner", "only one", by="title").pk == chat.pk  # the ORM's


def test_has_documents_finds_what_the_orm_form_finds():
    from agent_app.attachments.reading import has_documents, has_documents_orm
    from agent_app.models import ChatAttachment

    def attach(chat: ChatSession, media_type: str) -> None:
        ChatAttachment.objects.create(
            session=chat, uploader="u", name="f", media_type=media_type, size=1, file="f"
        )

    kinds = [[], ["image/png"], ["image/png", "application/pdf"], ["text/plain"], ["imagex/a"]]
    kinds += [["image%/x"], ["image_/x"], ["IMAGE/PNG"]]
    for media_types in kinds:
        chat = ChatSession.objects.create()
        for media_type in media_types:
            attach(chat, media_type)
        assert has_documents(str(chat.pk)) == has_documents_orm(str(chat.pk)), media_types
    assert has_documents(str(chat.pk)) is has_documents_orm(str(chat.pk))


def test_pk_exists_answers_as_the_orm_does_and_leaves_a_filtering_manager_to_it():
    from django.contrib.auth import get_user_model
    from django.db import models

    users = get_user_model().objects
    user = users.create_user("grace", password="pw")
    for pk in (user.pk, user.pk + 1000):
        assert pk_exists(users, pk) is users.filter(pk=pk).exists()

    class NoChats(models.Manager):
        def get_queryset(self):
            return super().get_queryset().none()

    chat = ChatSession.objects.create()
    hiding = NoChats()
    hiding.model = ChatSession
    assert pk_exists(ChatSession.objects, chat.pk) and not pk_exists(hiding, chat.pk)


def _compared(value: object) -> object:
    """What of a prepared value compares: psycopg's JSON wrappers (a JSON field's value on
    PostgreSQL) have no ``==`` of their own, so their wrapped object and dumper stand in."""
    if type(value).__name__ in {"Json", "Jsonb"} and hasattr(value, "obj"):
        return (value.obj, value.dumps)
    return value


def test_insert_sends_each_field_what_the_field_itself_would():
    """The fast paths of text, boolean, integer, JSON and date-time fields and of a key to a
    UUID (``_converter``) give exactly ``get_db_prep_save(pre_save(row, True))``: enum
    members, None, lazy text, and values of another type (which take the field's own
    path)."""
    import uuid
    from datetime import datetime

    from django.db import connection
    from django.utils import timezone
    from django.utils.functional import lazy

    from agent_app.models import ChatMessage, ChatRun, RunKind, RunStatus
    from agent_app.models.statements import _insert_sql

    lazy_text = lazy(lambda: "lazy", str)()
    session = "5f0b7e4e-4a43-4c1e-9d55-1f1d2b6c9a10"
    rows = [
        ChatRun(
            request_id="r1", session_id=session, status=RunStatus.RUNNING, kind=RunKind.MESSAGE
        ),
        ChatRun(request_id=lazy_text, session_id=session, error_message=None, attempts=3),
        ChatMessage(session_id=session, position=4, role="user", success=None, follows=None),
        ChatMessage(session_id=session, position="5", role="user", success=1, version=True),
        ChatRun(
            request_id="r2",
            session_id=uuid.UUID(session),
            ended_at=timezone.now(),
            usage={"input_tokens": 3, "nested": [1, "two", None]},
        ),
        ChatRun(request_id="r3", session_id="", ended_at=datetime(2026, 12, 6, 5, 0), usage=[]),
        ChatMessage(
            session_id=session,
            position=6,
            role="assistant",
            content=[{"type": "text", "text": "Hi"}],
            tool_calls=[{"id": "c1", "name": "f", "arguments": {}}],
            usage=None,
            extra=lazy_text,
        ),
        ChatMessage(session_id=session, position=7, content=7, tool_calls=1.5, extra=True),
    ]
    checked = 0
    for row in rows:
        fields = [field for field in type(row)._meta.concrete_fields if not field.primary_key]
        _, converters = _insert_sql(type(row), 1, False, connection.vendor)
        for field, convert in zip(fields, converters, strict=True):
            if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
                continue  # ``pre_save`` reads the clock: a new value each time
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the naive date, twice
                expected = field.get_db_prep_save(field.pre_save(row, True), connection)
                got = convert(row, connection)
            assert type(got) is type(expected), (field.name, got, expected)
            assert _compared(got) == _compared(expected), (field.name, got, expected)
            checked += 1
    assert checked > 100


def test_a_clock_field_is_set_on_the_row_and_sent_as_the_field_sends_it():
    """``auto_now_add`` (``pre_save`` reads the clock): the fast path sets the row's value
    and sends what the field would send for that value."""
    from django.db import connection
    from django.utils import timezone

    from agent_app.models import ChatMessage
    from agent_app.models.statements import _insert_sql

    row = ChatMessage(session_id="5f0b7e4e-4a43-4c1e-9d55-1f1d2b6c9a10", position=1)
    fields = [field for field in ChatMessage._meta.concrete_fields if not field.primary_key]
    _, converters = _insert_sql(ChatMessage, 1, False, connection.vendor)
    (index,) = [i for i, field in enumerate(fields) if field.name == "created_at"]
    got = converters[index](row, connection)
    assert row.created_at is not None and timezone.is_aware(row.created_at)
    assert got == fields[index].get_db_prep_value(row.created_at, connection)


@pytest.mark.parametrize(
    "moment",
    [
        dt.datetime(2026, 12, 6, 15, 4, 5, 123456, tzinfo=dt.UTC),
        dt.datetime(2026, 12, 6, 15, 4, 5, tzinfo=dt.UTC),  # no microseconds
        dt.datetime(2026, 12, 6, 16, 4, 5, 7, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    ],
)
def test_a_time_is_sent_as_the_backend_adapts_it(moment):
    from agent_app.models.statements import moment_param

    assert moment_param(moment, connection) == connection.ops.adapt_datetimefield_value(moment)
    field = ChatSession._meta.get_field("updated_at")
    assert moment_param(moment, connection) == field.get_db_prep_save(moment, connection)


def test_new_builds_the_instance_the_keyword_form_builds():
    """``new(model, **values)`` is ``model(**values)``: every field's value, defaults
    included (a fresh one for a callable default), and an unknown name refused."""
    from agent_app.models import ChatMessage, ChatRun
    from agent_app.models.statements import new

    def state(row: object) -> dict:
        return {key: value for key, value in vars(row).items() if key != "_state"}

    values = {
        "session_id": "5f0b7e4e-4a43-4c1e-9d55-1f1d2b6c9a10",
        "position": 3,
        "request_id": "r",
        "role": "user",
        "content": "Hi",
        "usage": None,
        "steering": False,
    }
    fast, plain = new(ChatMessage, **values), ChatMessage(**values)
    assert state(fast) == state(plain) and fast._state.adding and fast._state.db is None
    assert new(ChatMessage).extra is not new(ChatMessage).extra  # ``default=dict``: fresh
    run = {"request_id": "r", "session_id": values["session_id"], "kind": "message"}
    assert state(new(ChatRun, **run)) == state(ChatRun(**run))
    with pytest.raises(TypeError):
        new(ChatRun, no_such_field=1)
    # With a listener to a model's ``post_init``, the instance is built by ``__init__``.
    heard: list[object] = []

    def listener(sender: type, instance: object, **kwargs: object) -> None:
        heard.append(instance)

    post_init.connect(listener, sender=ChatRun)
    try:
        built = new(ChatRun, **run)
    finally:
        post_init.disconnect(listener, sender=ChatRun)
    assert heard == [built] and state(built) == state(ChatRun(**run))
    assert heard == [built]  # the listener is gone again


def test_new_leaves_a_model_with_its_own_constructor_to_it(monkeypatch):
    """A model whose ``__init__`` is its own is built by it: ``new`` cannot know what else
    that constructor does."""
    from agent_app.models import ChatRun, instances
    from agent_app.models.statements import new

    called: list[tuple] = []
    plain_init = ChatRun.__init__

    def own_init(self: ChatRun, *args: object, **kwargs: object) -> None:
        called.append(args)
        plain_init(self, *args, **kwargs)

    instances._plain_attnames.cache_clear()
    monkeypatch.setattr(ChatRun, "__init__", own_init)
    try:
        row = new(ChatRun, request_id="r", kind="message")
    finally:
        monkeypatch.undo()
        instances._plain_attnames.cache_clear()
    assert len(called) == 1 and row.request_id == "r"


def test_loaded_builds_the_instance_from_db_builds():
    """``instances.loaded`` is ``Model.from_db`` with every concrete field: the same
    values, a stored instance of that database."""
    from agent_app.models import ChatMessage
    from agent_app.models.instances import loaded

    session = ChatSession.objects.create(title="read back")
    fields = ChatSession._meta.concrete_fields
    values = [getattr(session, field.attname) for field in fields]
    names = [field.attname for field in fields]
    fast = loaded(ChatSession, "default", values)
    plain = ChatSession.from_db("default", names, values)
    assert vars(fast).keys() == vars(plain).keys()
    assert {key: value for key, value in vars(fast).items() if key != "_state"} == {
        key: value for key, value in vars(plain).items() if key != "_state"
    }
    assert (fast._state.adding, fast._state.db) == (False, "default") and fast == session
    message = loaded(ChatMessage, "default", [None] * len(ChatMessage._meta.concrete_fields))
    assert message.session_id is None and not message._state.adding


def test_what_a_run_reads_with_its_chats_row_is_what_read_entry_reads(
    django_assert_num_queries,
):
    """``entry_returning``'s expressions, returned by the statement that locks the chat's
    row as a run is stored, make the same ``Entry`` as ``read_entry``'s own reads: the
    chat's columns, its owner, and whether it holds a document (images aside)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from agent_app.assistants import entry_from, entry_returning, read_entry
    from agent_app.durable.store import bump_version
    from agent_app.models import ChatAttachment

    user = get_user_model().objects.create_user("ada", "ada@example.com", "pw")
    for owner, kinds in [(user, []), (None, ["image/png"]), (None, ["image/png", "text/plain"])]:
        chat = ChatSession.objects.create(
            owner=owner, browser_key="" if owner else "b" * 32, title="ünï 'q'"
        )
        for media_type in kinds:
            ChatAttachment.objects.create(
                session=chat, uploader="u", name="f", media_type=media_type, size=1, file="f"
            )
        with transaction.atomic():
            bumped = bump_version(str(chat.pk), timezone.now(), also=entry_returning())
        with django_assert_num_queries(1 if owner else 0):  # the owner, if there is one
            fast = entry_from(bumped.also, bumped.title)
        plain = read_entry(str(chat.pk))
        _same_instance(fast.chat, plain.chat)
        assert fast.chat.owner == plain.chat.owner
        assert (fast.assistant, fast.allowed) == (plain.assistant, plain.allowed)
        assert fast.documents is plain.documents is ("text/plain" in kinds)


@pytest.mark.parametrize("watched", [False, True], ids=["straight", "django-cursor"])
def test_run_answers_the_same_straight_to_the_driver_as_through_djangos_cursor(watched):
    """``run`` on SQLite with nobody watching goes to the driver; with a debug cursor
    (queries logged) through Django's: the same rows, counts and error types either way,
    and a watched statement is logged. Elsewhere (PostgreSQL) both go through Django's
    cursor, with the same answers."""
    first, second = ChatSession.objects.create(title="a"), ChatSession.objects.create(title="b")
    table = ChatSession._meta.db_table
    keys = [ChatSession._meta.pk.get_db_prep_value(row.pk, connection) for row in (first, second)]
    with CaptureQueriesContext(connection) if watched else contextlib.nullcontext() as seen:
        changed = run(
            connection, f'UPDATE "{table}" SET "title" = %s WHERE "id" IN (%s, %s)', ["c", *keys]
        )
        one = run(connection, f'SELECT "title" FROM "{table}" WHERE "id" = %s', keys[:1], ONE)
        rows = run(connection, f'SELECT "title", \'50%%\' FROM "{table}" ORDER BY "title"', [], ALL)
        with pytest.raises(IntegrityError), transaction.atomic():
            run(connection, f'INSERT INTO "{table}" ("id") VALUES (%s)', keys[:1])
    assert (changed, one, rows) == (2, ("c",), [("c", "50%"), ("c", "50%")])
    if watched:
        assert sum(table in query["sql"] for query in seen.captured_queries) == 4
