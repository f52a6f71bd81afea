"""The attachment endpoints over HTTP: upload, checks, quota, owners, downloads, deletion.

Real files (Pillow's PNGs, hand-made PDFs) go through Django's test client to the real views
and land in a real ``FileSystemStorage`` under a temporary ``MEDIA_ROOT``; every refusal
must be JSON with a code and a sentence, and must leave nothing in storage.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from agent_app.guard.access import BROWSER_KEY_FIELD
from agent_app.guard.tokens import issue
from agent_app.models import ChatAttachment, ChatMessage, ChatSession
from tests.app.test_attachments_files import image_bytes, pdf_bytes, png_declaring

pytestmark = pytest.mark.django_db

HTML = b"<!doctype html><html><script>alert(document.cookie)</script></html>"


@pytest.fixture(autouse=True)
def media(settings, tmp_path) -> Path:
    """Every stored file goes under a fresh folder of this test."""
    settings.MEDIA_ROOT = str(tmp_path)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return tmp_path


def stored_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def upload_url(session_id) -> str:
    return reverse("agent_app:attachment_upload", kwargs={"session_id": session_id})


def page_visit(client: Client) -> str:
    """Open the list page (the browser gets its id), return the browser key."""
    client.get(reverse("agent_app:session_list"))
    return client.session[BROWSER_KEY_FIELD]


def upload(client: Client, session_id, data: bytes, name: str, **extra):
    return client.post(upload_url(session_id), {"file": SimpleUploadedFile(name, data)}, **extra)


def test_a_png_upload_stores_the_file_and_its_first_upload_stores_the_chat(client, media):
    key = page_visit(client)
    session_id = uuid.uuid4()
    png = image_bytes("PNG", (64, 48))

    response = upload(
        client, session_id, png, "red box.png", headers={"accept": "application/json"}
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "red box.png"
    assert body["media_type"] == "image/png"
    assert body["size"] == len(png)
    row = ChatAttachment.objects.get(pk=body["id"])
    assert body["url"] == reverse(
        "agent_app:attachment", kwargs={"session_id": session_id, "attachment_id": row.pk}
    )
    assert (row.width, row.height) == (64, 48)
    chat = ChatSession.objects.get(pk=session_id)
    assert chat.browser_key == key and chat.owner is None
    (path,) = stored_files(media)
    assert path.read_bytes() == png
    assert "red box" not in str(path)  # the storage name is the app's, never the uploader's


@pytest.mark.parametrize(
    ("data", "name", "status", "code"),
    [
        (HTML, "cute-cat.png", 415, "type_mismatch"),
        (png_declaring(100_000, 100_000), "bomb.png", 422, "image_too_large"),
        (b"\x00\x01binary junk\x00", "blob.bin", 415, "unsupported_type"),
        (b"", "empty.txt", 400, "empty"),
        (image_bytes("PNG")[:40], "cut.png", 422, "bad_file"),
    ],
)
def test_a_refused_file_gets_a_json_code_and_a_sentence_and_nothing_is_stored(
    client, media, data, name, status, code
):
    page_visit(client)
    session_id = uuid.uuid4()

    response = upload(client, session_id, data, name)

    assert response.status_code == status
    body = response.json()
    assert body["code"] == code
    assert len(body["message"]) > 10
    assert stored_files(media) == []
    assert not ChatSession.objects.filter(pk=session_id).exists()  # a refusal stores no chat


def test_an_oversize_file_is_refused_before_it_is_read(client, media, settings):
    settings.ZETT_ATTACHMENT_MAX_BYTES = 1000
    page_visit(client)

    response = upload(
        client, uuid.uuid4(), image_bytes("PNG", (400, 400), (1, 2, 3)) * 3, "big.png"
    )

    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert response.json()["message"].startswith("“big.png” is ")
    assert response.json()["message"].endswith("; files can be at most 1000 B.")
    assert stored_files(media) == []


def test_types_can_be_narrowed_by_settings(client, settings):
    settings.ZETT_ATTACHMENT_TYPES = ["image/png"]
    page_visit(client)

    response = upload(client, uuid.uuid4(), pdf_bytes(["Hello"]), "doc.pdf")

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_type"


def test_a_missing_file_field_is_a_clear_error(client):
    page_visit(client)
    response = client.post(upload_url(uuid.uuid4()), {"other": "x"})
    assert response.status_code == 400
    assert response.json()["code"] == "no_file"


def test_names_are_sanitised(client):
    page_visit(client)
    response = upload(client, uuid.uuid4(), image_bytes("PNG"), "../../etc/x\u202egnp.png")
    assert response.status_code == 201
    assert response.json()["name"] == "xgnp.png"


def test_another_persons_chat_is_a_404_and_stores_nothing(client, media):
    owner = Client()
    page_visit(owner)
    session_id = uuid.uuid4()
    assert upload(owner, session_id, image_bytes("PNG"), "mine.png").status_code == 201

    page_visit(client)
    response = upload(client, session_id, image_bytes("PNG"), "theirs.png")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert ChatAttachment.objects.count() == 1
    assert len(stored_files(media)) == 1


def test_cookie_uploads_need_the_csrf_token_and_get_json_when_it_is_missing(media):
    client = Client(enforce_csrf_checks=True)
    page_visit(client)
    session_id = uuid.uuid4()

    refused = upload(client, session_id, image_bytes("PNG"), "a.png")
    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"
    assert "reload" in refused.json()["message"]
    assert stored_files(media) == []

    client.get(reverse("agent_app:chat", kwargs={"session_id": session_id}))
    token = client.cookies["csrftoken"].value
    accepted = upload(
        client, session_id, image_bytes("PNG"), "a.png", headers={"X-CSRFToken": token}
    )
    assert accepted.status_code == 201


def test_an_api_token_uploads_without_cookies_or_csrf_as_its_user(media):
    user = get_user_model().objects.create_user("robot", password="unused")
    _, secret = issue(user)
    client = Client(enforce_csrf_checks=True)
    session_id = uuid.uuid4()

    response = upload(
        client,
        session_id,
        pdf_bytes(["Quarterly numbers"]),
        "q.pdf",
        headers={"Authorization": f"Bearer {secret}"},
    )

    assert response.status_code == 201, response.content
    assert ChatSession.objects.get(pk=session_id).owner == user
    bad = upload(
        client, uuid.uuid4(), image_bytes("PNG"), "a.png", headers={"Authorization": "Bearer nope"}
    )
    assert bad.status_code == 401
    assert bad.json()["code"] == "unauthorized"


def test_the_daily_quota_counts_files_and_bytes_per_person(client, settings):
    settings.ZETT_ATTACHMENT_DAILY_FILES = 2
    page_visit(client)
    session_id = uuid.uuid4()
    for _ in range(2):
        assert upload(client, session_id, image_bytes("PNG"), "a.png").status_code == 201

    refused = upload(client, session_id, image_bytes("PNG"), "a.png")
    assert refused.status_code == 429
    assert refused.json()["code"] == "quota_exceeded"

    settings.ZETT_ATTACHMENT_DAILY_FILES = 100
    settings.ZETT_ATTACHMENT_DAILY_BYTES = 2 * len(image_bytes("PNG")) + 10
    refused = upload(client, session_id, image_bytes("PNG"), "a.png")
    assert refused.json()["code"] == "quota_exceeded"
    assert "daily limit" in refused.json()["message"]


def test_the_download_view_serves_the_owner_only(client):
    page_visit(client)
    session_id = uuid.uuid4()
    png = image_bytes("PNG", (10, 10))
    ref = upload(client, session_id, png, "dot.png").json()

    response = client.get(ref["url"])
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == png
    assert response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]

    stranger = Client()
    page_visit(stranger)
    assert stranger.get(ref["url"]).status_code == 404
    other_chat = reverse(
        "agent_app:attachment", kwargs={"session_id": uuid.uuid4(), "attachment_id": ref["id"]}
    )
    assert client.get(other_chat).status_code == 404


def test_a_document_downloads_as_a_file_not_inline(client):
    page_visit(client)
    ref = upload(client, uuid.uuid4(), b"# Notes\nhello", "notes.md").json()
    response = client.get(ref["url"])
    assert response["Content-Type"] == "text/markdown"
    assert response["Content-Disposition"].startswith("attachment;")


def test_deleting_a_chat_deletes_its_files_from_storage(
    client, media, django_capture_on_commit_callbacks
):
    page_visit(client)
    session_id = uuid.uuid4()
    for index in range(3):
        upload(client, session_id, image_bytes("PNG", (8 + index, 8)), f"{index}.png")
    ChatMessage.objects.create(session_id=session_id, position=0, role="user", content="hi")
    assert len(stored_files(media)) == 3

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("agent_app:delete", kwargs={"session_id": session_id}),
            headers={"accept": "application/json"},
        )

    assert response.status_code == 200
    assert ChatAttachment.objects.count() == 0
    assert stored_files(media) == []


def test_bulk_deletes_and_deleted_users_take_their_files_too(
    client, media, django_capture_on_commit_callbacks
):
    page_visit(client)
    chats = [uuid.uuid4() for _ in range(3)]
    for session_id in chats:
        upload(client, session_id, image_bytes("PNG"), "a.png")
    user = get_user_model().objects.create_user("owner", password="unused")
    _, secret = issue(user)
    upload(
        Client(),
        uuid.uuid4(),
        image_bytes("PNG"),
        "b.png",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert len(stored_files(media)) == 4

    with django_capture_on_commit_callbacks(execute=True):
        ChatSession.objects.filter(pk__in=chats).delete()
    assert len(stored_files(media)) == 1

    with django_capture_on_commit_callbacks(execute=True):
        user.delete()
    assert stored_files(media) == []


def test_a_deleted_chat_takes_no_new_upload(client, django_capture_on_commit_callbacks):
    page_visit(client)
    session_id = uuid.uuid4()
    upload(client, session_id, image_bytes("PNG"), "a.png")
    with django_capture_on_commit_callbacks(execute=True):
        ChatSession.objects.filter(pk=session_id).delete()

    response = upload(client, session_id, image_bytes("PNG"), "a.png")

    assert response.status_code == 410
    assert response.json()["code"] == "deleted"


def test_manage_check_names_bad_attachment_settings(settings):
    from agent_app.checks import check_setting_types

    settings.ZETT_ATTACHMENT_TYPES = ["image/png", "text/html"]
    settings.ZETT_ATTACHMENT_MAX_BYTES = 0
    problems = {error.id: error.msg for error in check_setting_types()}
    assert "text/html" in problems["zett.E017"]
    assert "ZETT_ATTACHMENT_MAX_BYTES must be >= 1" in problems["zett.E013"]


def test_a_body_declaring_more_than_any_allowed_file_is_refused_unread(client, settings, media):
    settings.ZETT_ATTACHMENT_MAX_BYTES = 1000
    page_visit(client)
    body = b"x" * (70 * 1024)

    response = client.generic(
        "POST",
        upload_url(uuid.uuid4()),
        body,
        content_type="multipart/form-data; boundary=never-read",
    )

    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert stored_files(media) == []


def test_a_file_far_over_the_limit_is_refused_by_its_own_name_and_size(client, settings, media):
    settings.ZETT_ATTACHMENT_MAX_BYTES = 1000
    page_visit(client)

    response = upload(client, uuid.uuid4(), b"x" * (200 * 1024 + 300), "../holiday\u202e photo.png")

    assert response.status_code == 413
    assert response.json() == {
        "code": "too_large",
        "message": "“holiday photo.png” is 200 KB; files can be at most 1000 B.",
    }
    assert stored_files(media) == []


def test_the_admin_lists_attachments_and_shows_them_on_their_chat(client, admin_client):
    page_visit(client)
    session_id = uuid.uuid4()
    ref = upload(client, session_id, image_bytes("PNG"), "in the admin.png").json()

    listing = admin_client.get(reverse("admin:agent_app_chatattachment_changelist"))
    assert listing.status_code == 200
    assert "in the admin.png" in listing.content.decode()
    detail = admin_client.get(reverse("admin:agent_app_chatattachment_change", args=[ref["id"]]))
    assert detail.status_code == 200
    chat = admin_client.get(reverse("admin:agent_app_chatsession_change", args=[session_id]))
    assert "in the admin.png" in chat.content.decode()


def test_a_body_that_is_no_multipart_form_gets_json_too(client):
    page_visit(client)
    response = client.generic(
        "POST", upload_url(uuid.uuid4()), b"garbage", content_type="multipart/form-data"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "bad_request"


def test_a_large_image_has_a_scaled_down_thumbnail_and_a_small_one_is_sent_as_is(client):
    from io import BytesIO

    from PIL import Image

    page_visit(client)
    session_id = uuid.uuid4()
    large = upload(client, session_id, image_bytes("PNG", (1200, 800)), "wide.png").json()
    small_png = image_bytes("PNG", (40, 30))
    small = upload(client, session_id, small_png, "small.png").json()

    response = client.get(large["url"] + "?thumbnail=1")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/jpeg"
    assert Image.open(BytesIO(response.content)).size == (512, 341)
    whole = client.get(large["url"])
    assert Image.open(BytesIO(b"".join(whole.streaming_content))).size == (1200, 800)
    same = client.get(small["url"] + "?thumbnail=1")
    assert b"".join(same.streaming_content) == small_png


def test_a_basic_authorization_header_of_a_proxy_leaves_the_cookie_in_charge(client):
    page_visit(client)
    response = upload(
        client, uuid.uuid4(), image_bytes("PNG"), "a.png", headers={"Authorization": "Basic eDp5"}
    )
    assert response.status_code == 201
