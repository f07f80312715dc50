"""A built-in's check against its broker: bounded in time, on a thread of its own.

A create or update of a source or sink checks a built-in's ``configs``
against the broker (connect, declare a queue, look a stream up) before
anything is kept, while the request waits. A broker that does not answer,
or a port that accepts and never speaks, must not hold the request, nor
the worker that serves it, for longer than :data:`CHECK_SECONDS`:

>>> run_check("source public/default/in (nats)", "NATS", "nats://10.0.0.1:4222", check)
BrokerUnreachableError: source public/default/in (nats): NATS at nats://10.0.0.1:4222 did
not answer within 5 s (step: connect)

* The check runs on a daemon thread; the caller waits at most
  :data:`CHECK_SECONDS` and is then answered, whatever the thread is doing.
  A daemon thread never keeps the process from ending (a SIGTERM'd worker
  stops at once however many checks are stuck).
* The check caps every client timeout it passes at :data:`CHECK_SECONDS`
  (:meth:`BrokerCheck.cap_ms`), so the thread itself ends soon after.
* It names its step (:attr:`BrokerCheck.step`) as it goes, so a timeout
  or a failure says how far it got.

A check's own :class:`ConfigError` (a missing queue, refused credentials)
is raised as it is; a connection error is a :class:`BrokerUnreachableError`,
any other error a :class:`ConfigError` naming the broker, host and step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sparkfn.api.errors import BrokerUnreachableError, ConfigError
from sparkfn.connectors.builtin._config import shown

CHECK_SECONDS = 5.0
"""The longest a check of a built-in's configs waits on its broker."""


class BrokerCheck:
    """Where a check is: the broker, its host and the step under way."""

    def __init__(self, broker: str, host: str) -> None:
        self.broker = broker
        self.host = host
        self.step = "connect"

    @staticmethod
    def cap_ms(configured: int) -> int:
        """A configured timeout (ms) as a check uses it: at most :data:`CHECK_SECONDS`."""
        return min(configured, int(CHECK_SECONDS * 1000))


def run_check(
    what: str,
    broker: str,
    host: str,
    check: Callable[[BrokerCheck], None],
    seconds: float = CHECK_SECONDS,
) -> None:
    """Run ``check`` on a daemon thread and wait at most ``seconds`` for it (see the module
    docstring for what is raised)."""
    progress = BrokerCheck(broker, host)
    failed: list[BaseException] = []
    done = threading.Event()

    def body() -> None:
        try:
            check(progress)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=body, name=f"check-{broker.lower()}", daemon=True).start()
    where = f"{broker} at {shown(host, 200)}"
    if not done.wait(seconds):
        msg = f"{what}: {where} did not answer within {seconds:g} s (step: {progress.step})"
        raise BrokerUnreachableError(msg)
    if not failed:
        return
    error = failed[0]
    if isinstance(error, ConfigError):
        raise error
    text = shown(f"{type(error).__name__}: {error}", 300)
    if isinstance(error, OSError | TimeoutError | ConnectionError):
        msg = f"{what}: cannot reach {where} (step: {progress.step}): {text}"
        raise BrokerUnreachableError(msg) from None
    msg = f"{what}: {where}: {progress.step} failed: {text}"
    raise ConfigError(msg) from None


@contextmanager
def lost_broker(
    what: str, broker: str, host: str, step: str, errors: tuple[type[BaseException], ...]
) -> Iterator[None]:
    """A connection error of the client (``errors``) during ``step`` of a run, as a
    :class:`BrokerUnreachableError` naming the broker, the host and the step.

    A source's runner takes that error for a failure, not the source's own fault
    (its failure policy's ``on_failure`` applies: by default the instance is
    replaced after a backoff, and opens again once the broker is back).
    """
    try:
        yield
    except errors as exc:
        msg = f"{what}: lost {broker} at {host} (step: {step}): {type(exc).__name__}: {exc}"
        raise BrokerUnreachableError(msg) from exc
