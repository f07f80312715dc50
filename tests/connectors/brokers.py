"""The brokers on this machine, for the broker connectors' tests.

Each broker is the real server on 127.0.0.1. A test that needs one it cannot
reach is skipped, except under ``CI=true``, where it fails: CI must never
pass by skipping (as tests/conftest.py does for PostgreSQL). Every test uses
names of its own (:func:`unique`) and removes what it made.

:func:`start_child` runs ``sparkfn <args>`` in a real child process;
:func:`start_worker` and :func:`kill_group` start a worker and SIGKILL it with
its JVM, as the crash tests (test_worker_crash.py) need. Every wait fails at
once with the child's output when the child ended (:func:`alive`,
``wait_for(..., log=)``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pika.frame
import pika.spec
import pytest

from sparkfn.store.store import Store
from sparkfn.topics.consumer import Consumer
from waiting import WAIT, until

HOST = "127.0.0.1"
PORTS = {"rabbitmq": 5672, "mqtt": 1883, "nats": 4222, "redis": 6379, "postgresql": 5432}
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def require(broker: str) -> None:
    """Skip (fail under CI=true) unless ``broker`` answers on its port."""
    port = PORTS[broker]
    try:
        with socket.create_connection((HOST, port), timeout=3):
            return
    except OSError as exc:
        reason = f"{broker} at {HOST}:{port} is not reachable: {exc}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: broker tests must run, not skip)", pytrace=False)
    pytest.skip(f"{reason}; start it to run these tests")


def mqtt_client(client_id: str = "", clean: bool = True) -> Any:
    """A paho client connected to Mosquitto, its network thread running."""
    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion

    made = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)
    made.connect(HOST, 1883)
    made.loop_start()
    # paho ignores a subscribe before the CONNACK
    until(made.is_connected, "mqtt: a CONNACK from the broker", 10, every=0.01)
    return made


@contextmanager
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts every connection and never sends a byte, as a
    hung broker does; the connections are held until the block ends."""
    with _listening("silent-port", lambda _conn: None) as port:
        yield port


@contextmanager
def _listening(name: str, greet: Callable[[socket.socket], None]) -> Iterator[int]:
    """A port on 127.0.0.1 whose every connection is passed to ``greet`` (an ``OSError``
    there ends that connection's greeting, not the server) and then held, unanswered,
    until the block ends."""
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(256)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn = listener.accept()[0]
            except OSError:  # closed: the block ended
                return
            held.append(conn)
            with contextlib.suppress(OSError):
                greet(conn)

    thread = threading.Thread(target=serve, name=name, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()
        thread.join(5)
        for conn in held:
            conn.close()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: a connect is refused at once."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def unique(prefix: str) -> str:
    """A name no other test (or run) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def values(store: Store, topic: str) -> list[str]:
    """Every value of ``topic``, as text, in log order per partition."""
    consumer = Consumer(store, topic, initial_position="earliest")
    out: list[str] = []
    while True:
        got = consumer.receive(max_messages=50_000)
        if not got:
            return out
        out.extend(m.value.decode() if m.value is not None else "" for m in got)


def wait_for(
    check: Callable[[], bool],
    what: str | Callable[[], str],
    timeout: float = 45.0,
    log: Path | None = None,
) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout`` seconds.

    ``what`` may be a callable, asked at the failure (to say how far things got).
    With ``log`` (a child's output), the failure shows its last lines.
    """

    def said() -> str:
        text = what() if callable(what) else what
        return text + (f":\n{log.read_text(errors='replace')[-3000:]}" if log is not None else "")

    until(check, said, timeout)


def env(store: Store) -> dict[str, str]:
    """The child's environment: this store, nothing else of sparkfn's."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("SPARKFN_")}
    out["SPARKFN_DATA_DIR"] = str(store.data_dir)
    out["SPARKFN_STORE_URL"] = store.url
    out["COLUMNS"] = "200"
    return out


def start_child(
    store: Store, log: Path, *args: str, group: bool = False
) -> subprocess.Popen[bytes]:
    """``sparkfn <args>`` in a child process; its output goes to ``log``.

    With ``group``, the child leads a process group of its own, which its
    JVM and Spark's Python workers join: :func:`kill_group` kills them all.
    """
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sparkfn.cli.main", *args],
            env=env(store),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=group,
        )


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child and reap it."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def _group_left(pgid: int) -> list[str]:
    """The processes of group ``pgid`` still running (zombies left out), as ``pid (name)``."""
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended while we looked
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :]
        fields = rest.split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            left.append(f"{stat.parent.name} ({name})")
    return left


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child started with ``group=True`` and every process of its group (its
    JVM, Spark's Python workers) at once, as a crash of the machine would; reap it and
    fail unless the whole group is gone within 10 s."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    until(
        lambda: not _group_left(proc.pid),
        lambda: f"the group to end after its SIGKILL; still running: {_group_left(proc.pid)}",
        10,
    )


def start_worker(
    store: Store, log: Path, port: int, timeout: float = WAIT
) -> subprocess.Popen[bytes]:
    """``sparkfn worker start`` on ``port`` over ``store``, in a process group of its own
    (see :func:`kill_group`); returns once ``/ready`` says it restored its runs, failing at
    once with its output if it ends first."""
    import httpx

    proc = start_child(store, log, "worker", "start", "--port", str(port), group=True)

    def ready() -> bool:
        alive(proc, log)
        try:
            return httpx.get(f"http://{HOST}:{port}/ready", timeout=10).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(ready, "the worker to be ready", timeout, log)
    except BaseException:
        if proc.poll() is None:
            kill_group(proc)
        raise
    return proc


def stop(
    proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0, codes: tuple[int, ...] = (0,)
) -> None:
    """SIGTERM (drain) the child; fail with its output unless it exits with one of ``codes``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        pytest.fail(f"the child did not stop in {timeout} s:\n{log.read_text()[-3000:]}")
    assert code in codes, f"the child exited {code}:\n{log.read_text()[-3000:]}"


def alive(proc: subprocess.Popen[bytes], log: Path) -> None:
    """Fail with the child's output if it ended."""
    if proc.poll() is not None:
        pytest.fail(f"the child ended with {proc.returncode}:\n{log.read_text()[-3000:]}")


def count(store: Store, topic: str) -> int:
    """How many messages ``topic`` holds (cheap: the partitions' end offsets)."""
    from sparkfn.topics.admin import TopicAdmin

    return sum(p.messages for p in TopicAdmin(store).stats(topic))


def fill(store: Store, topic: str, sent: list[str], partitions: int = 2) -> None:
    """Create ``topic`` (string schema) holding ``sent``, keyed ``k0``..``k6``."""
    from sparkfn.topics.admin import TopicAdmin
    from sparkfn.topics.message import Message
    from sparkfn.topics.producer import Producer

    TopicAdmin(store).create(topic, partitions=partitions, schema_type="string")
    Producer(store, topic).send_batch(
        [Message(v.encode(), key=f"k{i % 7}") for i, v in enumerate(sent)]
    )


@contextmanager
def mute_after_handshake_amqp() -> Iterator[int]:
    """A port on 127.0.0.1 that speaks AMQP 0-9-1 through the handshake (no heartbeats),
    opens the connection, then never answers again: a broker hung after the handshake.
    Its connections are held until the block ends."""

    def frames(conn: socket.socket, wanted: type) -> None:
        data = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                raise OSError("the client went away")
            data += chunk
            while True:
                used, frame = pika.frame.decode_frame(data)
                if frame is None:
                    break
                data = data[used:]
                if isinstance(getattr(frame, "method", None), wanted):
                    return

    def handshake(conn: socket.socket) -> None:
        conn.recv(8)  # b"AMQP\x00\x00\x09\x01"
        start = pika.spec.Connection.Start(
            server_properties={"product": "mute"}, mechanisms="PLAIN", locales="en_US"
        )
        conn.sendall(pika.frame.Method(0, start).marshal())
        frames(conn, pika.spec.Connection.StartOk)
        tune = pika.spec.Connection.Tune(channel_max=0, frame_max=131072, heartbeat=0)
        conn.sendall(pika.frame.Method(0, tune).marshal())
        frames(conn, pika.spec.Connection.Open)
        conn.sendall(pika.frame.Method(0, pika.spec.Connection.OpenOk()).marshal())

    with _listening("mute-amqp", handshake) as port:
        yield port
