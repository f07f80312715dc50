"""The attempts of a function's messages: retries, rollback of a failed attempt, stats.

Written once, for the per-message and the vectorized form alike: a
vectorized batch is one value, whose function argument is the whole batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sparkfn.api.errors import FatalError
from sparkfn.runtime.stats import ExceptionInfo

if TYPE_CHECKING:
    from sparkfn.runtime.function.emit import Properties
    from sparkfn.runtime.function.instance import FunctionInstance

_LOG = logging.getLogger("sparkfn.function")

Decode = Callable[[Any], Any]
"""Turns what an attempt is given into the function's argument."""
EmitResult = Callable[[Any, "str | None"], None]
"""Adds what the function returned (and the message's key) to the output."""


def attempt_each(
    inst: FunctionInstance,
    values: Sequence[Any],
    keys: Sequence[str | None],
    topics: Sequence[str | None],
    emit: EmitResult | None,
    messages: int = 1,
    properties: Sequence[Properties] | None = None,
    nack: bool = False,
) -> list[tuple[int, Exception]]:
    """Call the function on each of ``values``, up to ``attempts_in_place``
    times each, until an attempt succeeds; returns ``(index, last exception)``
    of the values that failed every attempt, for the caller to dead-letter.

    ``values[i]`` is decoded with the input serde of ``topics[i]`` (a
    ``None`` topic: given to the function as it is). What the function
    returns goes to ``emit`` with the value's key or, when ``emit`` is
    ``None``, to the output topic through its serde, with the value's key
    and ``properties[i]`` (see :data:`~.emit.Properties`: pairs, ``None`` for none,
    or a row number the caller resolves with :meth:`~.emit.EmitBuffer.resolve`).

    With ``auto_ack`` false, a call that returned without acknowledging its
    message (``context.ack``) keeps its outputs and state, as in Pulsar, and
    its message stays unacknowledged: with ``timeout_ms`` (Pulsar's ack
    timeout) it is delivered again at once, up to ``max_message_retries``
    times, and dead-lettered after the last delivery (unset: returned as
    failed, for :mod:`.redelivery` to deliver it again after ``timeout_ms``);
    without, it is not delivered again (a warning says how many). With
    ``strict_ack`` such a call is a failed attempt instead: its outputs and
    state are discarded, it is delivered again up to ``max_message_retries``
    times, then dead-lettered (unset: negative-acked, as an exception is).
    Neither is counted as a user exception.

    With ``nack`` (the function's negative acks, :mod:`.redelivery`) a call
    that raised is not tried again here: the value is returned as failed at
    once, for the caller to send it to its redelivery.

    A failed attempt leaves no trace: its state changes, outputs, metrics
    and publish callbacks are discarded and its exception is counted among
    the user exceptions. A success calls its publish callbacks and counts
    ``messages`` processed messages. The process latency recorded is the
    call's time shared by its successful values (a failed attempt's time
    included). A :class:`FatalError`
    is not a message error: it ends the task.

    This is the hot path, one iteration per message: it keeps what it
    needs in locals and appends an output straight into the columns.
    """
    call = inst.call  # the function's, or timed (timeout_ms)
    with_context = inst.user.takes_context
    context = inst.context
    state = inst.state
    savepoint = state.savepoint
    pending = inst.pending_metrics
    callbacks = context.callbacks
    stats = inst.stats
    out = inst.out
    out_value, out_key, out_props = out.value, out.key, out.properties
    output = inst.config.output or ""
    # An output to the buffer's own topic is its three values; any other, an add().
    plain = out.output == output
    encode: Callable[[Any], bytes] = bytes  # unused when ``emit`` is given
    utf8_out = False
    if emit is None:
        out_serde = inst.serdes.output_for(output)
        encode = out_serde.encode
        utf8_out = out_serde.kind in ("string", "bytes", "identity")
    decode: Decode = as_is
    decode_topic: str | None = None
    utf8_in = False
    attempts = inst.config.attempts_in_place
    needs_ack = not (inst.config.auto_ack or inst.user.vectorized)
    strict_ack = inst.config.strict_ack
    redeliver = inst.config.timeout_ms is not None  # Pulsar's ack timeout
    unacked_kept = 0
    acked = context.acked
    props = properties if properties is not None else [None] * len(values)
    failed: list[tuple[int, Exception]] = []
    processed = 0
    started = time.perf_counter()
    for i in range(len(values)):
        topic = topics[i]
        if topic != decode_topic and topic is not None:
            in_serde = inst.serdes.input_for(topic)
            decode, decode_topic = in_serde.decode, topic
            utf8_in = in_serde.custom is None and in_serde.kind == "string"
        context.index = i
        left = attempts
        while left:
            left -= 1
            if savepoint:
                savepoint.clear()
            if pending:
                pending.clear()
            if callbacks:
                callbacks.clear()
            if acked:
                acked.clear()
            mark = out.sealed + len(out_value)  # len(out), without a call
            try:
                raw = values[i]
                value = raw.decode() if utf8_in and raw is not None else decode(raw)
                result = call(value, context) if with_context else call(value)
                if result is not None:
                    if emit is not None:
                        emit(result, keys[i])
                    elif plain:
                        # A str for a UTF-8 output is encoded with the column, in Arrow.
                        out_value.append(
                            result if utf8_out and type(result) is str else encode(result)
                        )
                        out_key.append(keys[i])
                        out_props.append(props[i])
                    else:
                        out.add("output", output, encode(result), keys[i])
                        out_props[-1] = props[i]
            except Exception as exc:
                if isinstance(exc, FatalError):
                    raise
                state.rollback_message()
                out.truncate(mark)
                stats.record_exception(
                    ExceptionInfo.from_exception("user", exc, context.current_message_id())
                )
                if nack or not left:
                    failed.append((i, exc))
                    break
                continue
            unacked = needs_ack and not context.acked_current()
            if unacked and strict_ack:
                state.rollback_message()
                out.truncate(mark)
                if not left:
                    failed.append((i, NotAcknowledgedError(inst.config.fqfn, context, False)))
                continue
            processed += messages
            if pending:
                for name, metric in pending:
                    stats.record_metric(name, metric)
            if callbacks:
                context.run_callbacks()
            if unacked and redeliver:
                if left:
                    continue  # the ack timeout: delivered again, this call's effects kept
                failed.append((i, NotAcknowledgedError(inst.config.fqfn, context, True)))
            elif unacked:
                unacked_kept += 1
            break
    stats.processed_successfully += processed
    if unacked_kept:
        _LOG.warning(
            "function %s: %d message(s) processed but not acknowledged (auto_ack false, "
            "no timeout_ms): their outputs are kept and they are not delivered again",
            inst.config.fqfn,
            unacked_kept,
        )
    # One clock read per call, not two per message (a sixth of a simple
    # function's loop): the latency is the call's time over its successes.
    succeeded = len(values) - len(failed)
    if succeeded:
        stats.latency_ms_sum += (time.perf_counter() - started) * 1000
        stats.latency_count += succeeded
    return failed


class NotAcknowledgedError(Exception):
    """A message ``process`` returned from without acknowledging (``auto_ack`` false);
    ``kept``: its call's outputs and state were kept (not ``strict_ack``)."""

    def __init__(self, fqfn: str, context: Any, kept: bool) -> None:
        self.kept = kept
        super().__init__(
            f"function {fqfn} did not acknowledge message {context.current_message_id()} "
            "(auto_ack is false: context.ack acknowledges it)"
        )


def as_is(value: Any) -> Any:
    """The identity :data:`Decode`: the value is the function's argument already."""
    return value
