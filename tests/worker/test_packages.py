"""Function packages through a real worker process: a .py, zips and a wheel run; bad ones leave nothing.

The shared worker (both stores) never asks a package index
(``package_index_url: none``): the library the zips need, ``tinylib``, is
not installed anywhere but in the wheels the tests build, in two versions,
one per function. Its package limits are 1 MiB uploaded, 2 MiB expanded.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from wheels import REPORT, build_wheel, build_zip, tinylib
from worker_process import MIB, SharedWorker

from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.consumer import Consumer
from sparkfn.topics.message import Message
from sparkfn.topics.producer import Producer
from waiting import WAIT, until

EXCLAIM = Path(__file__).resolve().parents[2] / "examples" / "exclamation.py"
FUNCTIONS = "/admin/v3/functions/public/default"
CONFIG = {"processingGuarantees": "EFFECTIVELY_ONCE", "subscriptionPosition": "Earliest"}


def _register(client: httpx.Client, name: str, *, file: Path | None = None, **more: Any) -> None:
    config = {**CONFIG, "inputs": [f"in-{name}"], "output": f"out-{name}", **more}
    fields = {"functionConfig": json.dumps(config)}
    files = {"data": (file.name, file.read_bytes())} if file is not None else None
    if "url" in more:
        fields["url"] = more.pop("url")
        config.pop("url")
        fields["functionConfig"] = json.dumps(config)
    created = client.post(f"/admin/v3/functions/public/default/{name}", data=fields, files=files)
    assert created.status_code == 200, created.text


def _wait_processed(
    client: httpx.Client, worker: SharedWorker, counts: dict[str, int], timeout: float = WAIT
) -> None:
    def lagging() -> list[str]:
        return [n for n, count in counts.items() if _processed(client, n) < count]

    def said() -> str:
        statuses = [client.get(f"{FUNCTIONS}/{n}/status").json() for n in lagging()]
        return f"every function to process its messages: {statuses}\n{worker.output()[-20000:]}"

    until(lambda: not lagging(), said, timeout, every=0.5)


def _processed(client: httpx.Client, name: str) -> int:
    status = client.get(f"/admin/v3/functions/public/default/{name}/status").json()
    return sum(i["status"]["numSuccessfullyProcessed"] for i in status.get("instances", []))


def _outputs(store: Store, topic: str) -> list[str]:
    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[str] = []
    while batch := consumer.receive(max_messages=10_000):
        out.extend(m.value.decode() for m in batch if m.value is not None)
    return sorted(out)


@pytest.mark.long_running(120)
@pytest.mark.backend("postgresql")
def test_a_py_two_zips_and_a_wheel_run_each_with_its_own_library(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    store = shared_worker.store
    names = ("py", "zip1", "zip2", "whl")
    admin = TopicAdmin(store)
    for name in names:
        admin.create(f"in-{name}", schema_type="string")
        admin.create(f"out-{name}", schema_type="string")
        Producer(store, f"in-{name}").send_batch([Message(f"m{i}".encode()) for i in range(5)])

    # tinylib 1.0 by requirements.txt, its wheel inside; tinylib 2.0 in Pulsar's zip layout.
    one = tinylib(tmp_path / "one", "1.0")
    zip1 = build_zip(
        tmp_path / "zip1" / "report.zip",
        {"report.py": REPORT, "requirements.txt": "tinylib==1.0\n", f"wheels/{one.name}": one},
    )
    two = tinylib(tmp_path / "two", "2.0")
    zip2 = build_zip(
        tmp_path / "zip2" / "report.zip",
        {"report/src/report.py": REPORT, f"report/deps/{two.name}": two},
    )
    shout = build_wheel(
        tmp_path / "whl", "shout", "0.1", {"shout.py": "def process(v):\n    return v.upper()\n"}
    )
    with httpx.Client(base_url=shared_worker.url, timeout=120) as client:
        uploaded = client.post(
            "/admin/v3/functions/upload",
            data={"path": "public/default/report-2.zip"},
            files={"data": ("report.zip", zip2.read_bytes())},
        )
        assert uploaded.status_code == 200, uploaded.text
        digest2 = uploaded.json()["digest"]
        assert uploaded.json()["paths"] == ["public/default/report-2.zip"]

        _register(client, "py", file=EXCLAIM)
        _register(client, "zip1", file=zip1, className="report.process")
        _register(client, "zip2", url="public/default/report-2.zip", className="report.process")
        _register(client, "whl", file=shout, className="shout.process")
        _wait_processed(client, shared_worker, {n: 5 for n in names})
        assert _outputs(store, "out-py") == [f"m{i}!" for i in range(5)]
        assert _outputs(store, "out-whl") == [f"M{i}" for i in range(5)]

        # Batches of both zips in turn, until one of Spark's Python worker
        # processes has run both (one task slot: local[1]); every output
        # still shows its own function's tinylib, imported and looked up again.
        sent = 5
        shared: set[str] = set()
        while not shared and sent < 35:
            for name in ("zip1", "zip2"):
                Producer(store, f"in-{name}").send_batch(
                    [Message(f"m{i}".encode()) for i in range(sent, sent + 5)]
                )
            sent += 5
            _wait_processed(client, shared_worker, {"zip1": sent, "zip2": sent})
            pids = []
            for name, version in (("zip1", "1.0"), ("zip2", "2.0")):
                outputs = [o.rsplit(":", 1) for o in _outputs(store, f"out-{name}")]
                assert sorted(o[0] for o in outputs) == sorted(
                    f"m{i}:{version}:{version}" for i in range(sent)
                )
                pids.append({o[1] for o in outputs})
            shared = pids[0] & pids[1]
        assert shared, f"no Python worker process ran both zips: {pids}"

        # The shared worker keeps the packages of earlier tests: these are this test's.
        ours = {client.get(f"{FUNCTIONS}/{n}").json()["packageDigest"] for n in names}
        listed = {p["digest"]: p for p in client.get("/admin/v3/packages").json()}
        assert sorted(listed[d]["kind"] for d in ours) == ["py", "whl", "zip", "zip"]
        assert listed[digest2]["filename"] == "report.zip"
        assert listed[digest2]["uploadedBy"] == "anonymous"
        for ref in ("public/default/report-2.zip", digest2):
            got = client.get("/admin/v3/functions/download", params={"path": ref})
            assert got.status_code == 200 and got.content == zip2.read_bytes()
        info = client.get("/admin/v3/functions/public/default/zip2").json()
        assert info["packageDigest"] == digest2


def _refused(response: httpx.Response, status: int, reason: str, says: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["reason"] == reason, body
    assert says in body["message"], body


def _upload(client: httpx.Client, file: Path, path: str = "team/fn") -> httpx.Response:
    return client.post(
        "/admin/v3/functions/upload",
        data={"path": path},
        files={"data": (file.name, file.read_bytes())},
    )


def test_refused_packages_get_a_precise_reason_and_leave_nothing(
    shared_worker: SharedWorker, tmp_path: Path
) -> None:
    packages_dir = shared_worker.data_dir / "packages"
    before = sorted(packages_dir.rglob("*")) if packages_dir.exists() else []
    slip = build_zip(tmp_path / "slip.zip", {"fn.py": "x = 1\n", "../../evil.py": "x = 2\n"})
    absolute = build_zip(tmp_path / "absolute.zip", {"/tmp/evil.py": "x = 2\n"})
    link = zipfile.ZipInfo("lib")
    link.external_attr = 0o120777 << 16  # a symbolic link
    with zipfile.ZipFile(tmp_path / "link.zip", "w") as zf:
        zf.writestr(link, "/etc")
    bomb = build_zip(tmp_path / "bomb.zip", {"fn.py": "x = 1\n", "zeros.bin": b"\0" * 3 * MIB})
    fake = tmp_path / "fake.zip"
    fake.write_text("def process(x):\n    return x\n")
    big = tmp_path / "big.py"
    big.write_text("#" * (MIB + MIB // 2))  # past the package limit, within the body limit
    huge = tmp_path / "huge.py"
    huge.write_text("#" * (3 * MIB))  # past the body limit too

    with httpx.Client(base_url=shared_worker.url, timeout=120) as client:
        _refused(_upload(client, slip), 400, "unsafe_archive", "entry '../../evil.py' climbs out")
        _refused(_upload(client, absolute), 400, "unsafe_archive", "is an absolute path")
        _refused(_upload(client, tmp_path / "link.zip"), 400, "unsafe_archive", "symbolic link")
        _refused(_upload(client, bomb), 413, "package_too_large", f"limit of {2 * MIB} bytes")
        _refused(_upload(client, fake), 400, "invalid_package", "fake.zip is not a zip archive")
        _refused(_upload(client, big), 413, "package_too_large", f"limit of {MIB} bytes")
        early = _upload(client, huge)  # refused by its Content-Length, before the body is read
        _refused(early, 413, "package_too_large", f"larger than the worker accepts: {2 * MIB}")
        assert int(early.json()["message"].split("(")[1].split()[0]) > 3 * MIB

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b"--b\r\nContent-Disposition: form-data; name=path\r\n\r\nteam/fn\r\n"
            yield b'--b\r\nContent-Disposition: form-data; name=data; filename="c.py"\r\n\r\n'
            for _ in range(3):
                yield b"#" * MIB
            yield b"\r\n--b--\r\n"

        streamed = client.post(
            "/admin/v3/functions/upload",
            content=chunks(),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )
        _refused(streamed, 413, "package_too_large", f"larger than the worker accepts: {2 * MIB}")

        functions = "/admin/v3/functions/public/default"
        config = {"functionConfig": json.dumps({"inputs": ["in"], "className": "fn.process"})}
        with slip.open("rb") as code:
            registered = client.post(f"{functions}/fn", data=config, files={"data": code})
        _refused(registered, 400, "unsafe_archive", "zip slip")
        with fake.open("rb") as code:
            registered = client.post(f"{functions}/fn", data=config, files={"data": code})
        _refused(registered, 400, "invalid_package", "is not a zip archive")
        by_url = client.post(f"{functions}/fn", data={**config, "url": "team/fn"})
        _refused(by_url, 404, "package_not_found", "no package was uploaded under the path")
        download = client.get("/admin/v3/functions/download", params={"path": "team/fn"})
        _refused(download, 404, "package_not_found", "'team/fn'")

        assert client.get(functions).json() == []
        listed = client.get("/admin/v3/packages").json()
        assert not [p for p in listed if "team/fn" in p["paths"]]
    assert (sorted(packages_dir.rglob("*")) if packages_dir.exists() else []) == before
