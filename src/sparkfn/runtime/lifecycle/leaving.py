"""One instance's stop and start again, while the others run on (docs/lifecycle.md, "One instance").

:class:`InstanceStops` is the part of :class:`~.supervisor.Supervisor` that
stops one instance: ``cancel`` at once on the caller's thread, ``drain`` and
``suspend`` asked here (a :class:`~.supervisor_core.Leave`) and carried out
step by step by the supervisor's thread (:meth:`~InstanceStops._tend_leaves`),
and :meth:`~InstanceStops.restart_instance`.

A stop meets an instance that has ended (stopped alone already, shut down,
died): :func:`~.control.set_state` leaves its record as it is and returns
it among the kept, and the stop does nothing more, as asking twice does.
"""

from __future__ import annotations

from sparkfn.api.errors import InstanceStoppingError
from sparkfn.api.lifecycle import StopMode
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.lifecycle.supervisor_core import Leave, SupervisorCore


class InstanceStops(SupervisorCore):
    """A supervisor's stops of one instance (see the module docstring)."""

    def stop_instance(
        self,
        instance_id: int,
        mode: str | StopMode = StopMode.CANCEL,
        *,
        cause: str = "",
    ) -> None:
        """Stop one instance; the others take over its share.

        ``cancel`` stops it now: ``close()`` only, on this thread. ``drain``
        (what was in the input when asked is processed first) and
        ``suspend`` are asked here and carried out by the supervisor's
        thread: the instance takes no more input, the batch it is in
        commits, and its objects are closed gracefully
        (``prepare_to_shutdown()``, ``shutdown()``, ``close()``); then it is
        ``STOPPED``. Asking again while it stops changes nothing; a cancel
        takes over. An instance that ended otherwise (shut down, died:
        ``ERROR``; ``SUSPENDED``) is left as it is.
        """
        try:
            stop_mode = StopMode.parse(mode)
        except ValueError as exc:
            msg = f"{self.target.kind} {self.fqfn}: {exc}"
            raise ValueError(msg) from None
        if stop_mode is StopMode.CANCEL:
            with self._lock:
                self._leaving.pop(instance_id, None)
                moves = control.set_state(
                    self.store,
                    self.control_id,
                    control.STOPPED,
                    cause or "stopped by user",
                    [instance_id],
                    keep_other_ends=True,
                )
                if moves.kept:
                    return  # it ended otherwise: retired and closed by whoever ended it
                self.target.retire([instance_id])
                self._close([instance_id], graceful=False)
            return
        record = control.read_control(self.store, self.control_id)
        found = record.instances.get(instance_id) if record is not None else None
        if found is not None and found.state in control.ENDED:
            return  # it runs no more: nothing to stop
        point = self.target.stop_point(stop_mode)  # a drain's: the input's ends now
        with self._request_lock:
            if instance_id not in self._leaving:
                self._leaving[instance_id] = Leave(
                    stop_mode, point, cause or f"{stop_mode.value} requested by user"
                )
        self._wake.set()

    def _tend_leaves(self) -> None:
        """Carry each instance's graceful stop one step on (the supervisor's thread)."""
        with self._request_lock:
            leaving = list(self._leaving.items())
        for i, leave in leaving:
            if not leave.begun:
                if leave.mode is StopMode.DRAIN and not self.target.reached(leave.point):
                    continue  # it takes its share until the input as of the drain is processed
                moves = control.set_state(
                    self.store, self.control_id, control.STOPPING, leave.cause, [i], keep_ended=True
                )
                if moves.kept:  # it ended meanwhile (died, shut down): nothing left to stop
                    with self._request_lock:
                        self._leaving.pop(i, None)
                    continue
                leave.batch = self.target.begin_leave(i, leave.mode)
                leave.begun = True
            if not self.target.left(i, leave.batch):
                continue
            self._close([i], graceful=True)
            done = "drained" if leave.mode is StopMode.DRAIN else "suspended"
            # An instance that died in its last batch keeps its ERROR: the policy answers it.
            control.set_state(
                self.store,
                self.control_id,
                control.STOPPED,
                f"{done} ({leave.cause})",
                [i],
                keep_ended=True,
            )
            with self._request_lock:
                self._leaving.pop(i, None)

    def restart_instance(self, instance_id: int, cause: str = "restarted by user") -> None:
        """Start a stopped or shut-down instance again; it takes its share back.

        Refused (:class:`InstanceStoppingError`) while the instance stops alone, and
        while the whole run stops or has ended: an instance revived after the run's
        end-of-stream batch was planned would never get it, and the stop would wait
        for it.
        """
        with self._lock:
            run_stop = self.stopping
            if run_stop is not None or self._ended.is_set():
                doing = "has ended" if self._ended.is_set() else f"is {run_stop}ing"
                msg = (
                    f"{self.target.kind} {self.fqfn} {doing}; instance {instance_id} "
                    "cannot be started again now (start the whole run once it has stopped)"
                )
                raise InstanceStoppingError(msg)
            leave = self._leaving.get(instance_id)
            if leave is not None:
                msg = (
                    f"{self.target.kind} {self.fqfn} instance {instance_id} is stopping "
                    f"({leave.cause}); start it again once it is STOPPED"
                )
                raise InstanceStoppingError(msg)
            control.revive(self.store, self.control_id, [instance_id], cause, self.epoch)
            if not self.target.restarts_whole:
                self.target.launch(self.epoch, [instance_id])
