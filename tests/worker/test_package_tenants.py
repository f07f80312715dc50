"""Packages of two tenants on one worker learn nothing of each other (issue 28, point 3).

The real app with auth on, over HTTP, on both stores; tokens of two tenant
admins and a superuser. Nothing here starts a function, so no Spark.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from app_server import served
from sqlalchemy import func, select
from wheels import build_wheel, build_zip

from sparkfn.store import registry_schema
from sparkfn.worker.api.app import create_app
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys
from sparkfn.worker.service import Worker
from sparkfn.worker.settings import WorkerSettings

SECRET = "a-worker-secret-for-the-package-tests-0123"
KEYS = TokenKeys.load(secret_key=SECRET)
ALICE = Principal("alice", Role.TENANT_ADMIN, "tenant-a")
BOB = Principal("bob", Role.TENANT_ADMIN, "tenant-b")
OPS = Principal("ops", Role.SUPERUSER)
CODE = b"def process(x):\n    return x\n"


def _headers(principal: Principal) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS.issue(principal, timedelta(hours=1))}"}


@pytest.fixture
def worker(store_url: str, data_dir: Path) -> Iterator[Worker]:
    settings = WorkerSettings.resolve(
        data_dir=data_dir,
        store_url=store_url,
        auth_enabled=True,
        token_secret_key=SECRET,
        package_index_url="none",
    )
    worker = Worker(settings)
    worker.open()
    yield worker
    worker.shutdown()


@pytest.fixture
def client(worker: Worker) -> Iterator[httpx.Client]:
    with served(create_app(worker)) as client:
        yield client


def _upload(
    client: httpx.Client, who: Principal, path: str, filename: str, content: bytes
) -> httpx.Response:
    return client.post(
        "/admin/v3/functions/upload",
        data={"path": path},
        files={"data": (filename, content)},
        headers=_headers(who),
    )


def _ok(response: httpx.Response) -> dict[str, object]:
    assert response.status_code == 200, response.text
    return dict(response.json())


def _refused(response: httpx.Response, status: int, reason: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["reason"] == reason, body
    return str(body["message"])


def _digest(content: bytes) -> str:
    return f"sha256:{hashlib.sha256(content).hexdigest()}"


def _package_rows(worker: Worker) -> int:
    with worker.open_store().read() as conn:
        return int(
            conn.execute(select(func.count()).select_from(registry_schema.packages)).scalar_one()
        )


def test_an_upload_of_another_tenants_bytes_answers_with_the_uploaders_own_record(
    client: httpx.Client,
) -> None:
    theirs = _ok(_upload(client, BOB, "tenant-b/fn.py", "bobs.py", CODE))
    assert (theirs["uploadedBy"], theirs["filename"]) == ("bob", "bobs.py")
    mine = _ok(_upload(client, ALICE, "tenant-a/fn.py", "alices.py", CODE))
    assert mine["digest"] == theirs["digest"]
    assert (mine["uploadedBy"], mine["filename"], mine["paths"]) == (
        "alice",
        "alices.py",
        ["tenant-a/fn.py"],
    )
    assert mine["uploadedAt"] != theirs["uploadedAt"]

    listed = _ok_list(client, ALICE)
    assert [(p["uploadedBy"], p["filename"], p["paths"]) for p in listed] == [
        ("alice", "alices.py", ["tenant-a/fn.py"])
    ]
    assert [(p["uploadedBy"], p["filename"], p["paths"]) for p in _ok_list(client, BOB)] == [
        ("bob", "bobs.py", ["tenant-b/fn.py"])
    ]
    # A superuser sees the package once, with every path.
    everything = _ok_list(client, OPS)
    assert [sorted(p["paths"]) for p in everything] == [["tenant-a/fn.py", "tenant-b/fn.py"]]
    downloaded = client.get(
        "/admin/v3/functions/download", params={"path": mine["digest"]}, headers=_headers(ALICE)
    )
    assert downloaded.status_code == 200, downloaded.text
    assert downloaded.content == CODE
    assert 'filename="alices.py"' in downloaded.headers["content-disposition"]


def _ok_list(client: httpx.Client, who: Principal) -> list[dict[str, object]]:
    listed = client.get("/admin/v3/packages", headers=_headers(who))
    assert listed.status_code == 200, listed.text
    return list(listed.json())


def test_another_tenants_digest_is_answered_as_a_missing_one(
    worker: Worker, client: httpx.Client
) -> None:
    theirs = _ok(_upload(client, BOB, "tenant-b/secret.py", "secret.py", CODE))["digest"]
    missing = _digest(b"never uploaded by anyone")
    answers = []
    for digest in (theirs, missing):
        download = client.get(
            "/admin/v3/functions/download", params={"path": digest}, headers=_headers(ALICE)
        )
        config = json.dumps({"inputs": ["tenant-a/default/in"], "className": "secret.process"})
        create = client.post(
            "/admin/v3/functions/tenant-a/default/f",
            data={"functionConfig": config, "url": digest},
            headers=_headers(ALICE),
        )
        answers.append(
            [
                _refused(download, 404, "package_not_found").replace(digest, "D"),
                _refused(create, 404, "package_not_found").replace(digest, "D"),
            ]
        )
    assert answers[0] == answers[1]
    assert _ok_list(client, ALICE) == []
    assert worker.registry.names("tenant-a", "default") == []
    # Bob still has it, and a superuser sees it.
    download = client.get(
        "/admin/v3/functions/download", params={"path": theirs}, headers=_headers(BOB)
    )
    assert download.content == CODE


@pytest.mark.parametrize(
    "path",
    [
        "tenant-a/../tenant-b/fn.py",
        "tenant-a/x/../fn.py",
        "tenant-a/./fn.py",
        "tenant-a//fn.py",
        "tenant-a/fn.py/..",
        "tenant-a/fn.py/",
        "tenant-a/a\\..\\b.py",
        "/tenant-a/fn.py",
    ],
)
def test_a_path_with_traversal_or_odd_segments_is_refused(
    worker: Worker, client: httpx.Client, path: str
) -> None:
    who = OPS if path.startswith("/") else ALICE
    message = _refused(_upload(client, who, path, "fn.py", CODE), 400, "invalid_package")
    assert f"upload path {path!r} is not usable" in message
    assert "'..'" in message
    assert _package_rows(worker) == 0
    assert not list((worker.settings.packages_dir).glob("*/"))


def test_a_fake_wheel_is_refused_whether_or_not_its_bytes_are_stored(
    worker: Worker, client: httpx.Client, tmp_path: Path
) -> None:
    archive = build_zip(tmp_path / "report.zip", {"report.py": "def process(x):\n    return x\n"})
    content = archive.read_bytes()
    answers = []
    for stored in (False, True):
        if stored:
            _ok(_upload(client, BOB, "tenant-b/report.zip", "report.zip", content))
        upload = _upload(client, ALICE, "tenant-a/r.whl", "report-1.0-py3-none-any.whl", content)
        config = json.dumps({"inputs": ["tenant-a/default/in"], "className": "report.process"})
        create = client.post(
            "/admin/v3/functions/tenant-a/default/f",
            data={"functionConfig": config},
            files={"data": ("report-1.0-py3-none-any.whl", content)},
            headers=_headers(ALICE),
        )
        answers.append(
            [
                _refused(upload, 400, "invalid_package"),
                _refused(create, 400, "invalid_package"),
            ]
        )
    assert answers[0] == answers[1]
    assert "is not a wheel: it has no *.dist-info/WHEEL" in answers[0][0]
    assert worker.registry.names("tenant-a", "default") == []
    assert _ok_list(client, ALICE) == []
    assert _package_rows(worker) == 1  # bob's zip

    # A real wheel named .zip is refused too: a package's kind follows its content.
    wheel = build_wheel(tmp_path / "w", "shout", "0.1", {"shout.py": "def process(v):\n    1\n"})
    renamed = _upload(client, ALICE, "tenant-a/shout.zip", "shout.zip", wheel.read_bytes())
    assert "is a wheel" in _refused(renamed, 400, "invalid_package")
    as_py = _upload(client, ALICE, "tenant-a/r.py", "r.py", content)
    assert "is a zip archive, not Python source" in _refused(as_py, 400, "invalid_package")
