"""Forgetting a function: what deleting it removes from the store and the data dir.

A deleted function leaves nothing that a new function of the same name
would inherit, and no file of its own: its state, statistics, exceptions,
lifecycle records, Spark checkpoint (with any ``.tmp`` file a write cut
short left in it, and the function's directory once empty) and its
lifecycle record's commit hint (``hints/control-...``) and its log files
(:mod:`sparkfn.runtime.function.logs`) go; its subscription goes too when ``cleanup_subscription``
is set (Pulsar's default), so a new function of that name starts from its
``subscription_position``; kept, the new one resumes where this one stopped
(and any function may claim it: see :mod:`sparkfn.topics.subscription`). A
subscription that another function owns is left alone. Topics, their
messages and uploaded packages stay, except the function's retry topic
(:mod:`sparkfn.runtime.function.redelivery`), which goes with its
subscription: its messages are that subscription's negative-acked ones.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass

from sqlalchemy import delete

from sparkfn.api.errors import TopicNotFoundError
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.function.logs import log_dir
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.query.build import checkpoint_dir
from sparkfn.store import schema, signals
from sparkfn.store.store import Store
from sparkfn.topics import subscription
from sparkfn.topics.admin import TopicAdmin

# Rows keyed by the function's FQFN (state) or by its run's control id (stats,
# lifecycle records: a sink's are its own, see control.control_id).
_BY_FQFN = (schema.function_state,)
# Also what a deleted source loses (sparkfn.connectors.source.hosted_source.purge_source).
CONTROL_TABLES = (
    schema.function_instance_stats,
    schema.function_batch_stats,
    schema.function_exceptions,
    schema.function_runs,
    schema.function_instance_runs,
    schema.function_transitions,
    schema.function_commands,
    schema.function_objects,
)


@dataclass(frozen=True)
class Purged:
    """What :func:`purge_function` removed."""

    rows: int
    subscription_cursors: int
    checkpoint_removed: bool


def purge_function(store: Store, config: FunctionConfig, *, kind: str = "function") -> Purged:
    """Remove everything the store and the data dir keep for ``config``'s function.

    Call it only when no run of the function is active (stop it first).
    """
    cid = control.control_id(kind, config.fqfn)
    rows = cursors = 0
    retries = False
    with store.write() as conn:
        for table in _BY_FQFN:
            rows += conn.execute(delete(table).where(table.c.fqfn == config.fqfn)).rowcount
        for table in CONTROL_TABLES:
            rows += conn.execute(delete(table).where(table.c.fqfn == cid)).rowcount
        # A subscription another run owns is that run's: this function never
        # read it (its plans were refused), so nothing of it goes.
        name = config.subscription
        if subscription.owner_of(conn, name) in (None, cid):
            # The last planned batch goes either way: it carries the old runs' epoch,
            # which a new run (its epochs start again at 1) would take for a newer one.
            # So does the claim: a kept subscription is free for the next function.
            plans = schema.subscription_plans
            rows += conn.execute(delete(plans).where(plans.c.name == name)).rowcount
            subscription.release(conn, name)
            if config.cleanup_subscription:
                cursors = subscription.delete_subscription(conn, name)
                retries = True
    if retries:  # its waiting messages went with the subscription, as Pulsar's do
        with contextlib.suppress(TopicNotFoundError):
            TopicAdmin(store).delete(config.retry_topic)
    location = checkpoint_dir(store, config, kind)
    existed = location.exists()
    shutil.rmtree(location, ignore_errors=True)
    # The function's own directory, then its namespace's, its tenant's and functions/
    # (sinks/), each once empty.
    for parent in list(location.parents)[:4]:
        try:
            parent.rmdir()
        except OSError:
            break
    with contextlib.suppress(FileNotFoundError):
        (store.data_dir / signals.HINTS_DIR / signals.control_hint(cid)).unlink()
    if kind == "function":  # a new function of this name must not show these lines as its own
        shutil.rmtree(log_dir(store.data_dir, config.fqfn), ignore_errors=True)
    return Purged(rows=rows, subscription_cursors=cursors, checkpoint_removed=existed)
