"""What a group's batch is made of: each working member's share, packed into tasks.

Pure data and arithmetic, shared by the group's reader (on the driver,
which plans) and its tasks (on executors, which run the slices).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.group.members import Member, parsed_config
from sparkfn.topics.admin import TopicInfo
from sparkfn.topics.spark.planning import InstanceRanges, TopicRange


@dataclass(frozen=True)
class MemberSlice:
    """One member's share of a task: its ranges (or its end-of-stream markers)."""

    control_id: str
    epoch: int
    version: str
    # The member's FunctionConfig as JSON: a string is pickled into the task at
    # once, and parsed once per Python worker (the same object batch after batch).
    spec: str
    parts: tuple[InputPartition, ...]
    capped: bool = False  # its data in this batch was cut at its row budget
    exit_note: str | None = None  # where a dead Python worker's exit status goes (a probe)

    @property
    def config(self) -> FunctionConfig:
        """The member's function config (parsed once per process and spec)."""
        return parsed_config(self.spec)


@dataclass(frozen=True)
class GroupTask(InputPartition):
    """One Spark task of a group's batch: the slices of one or more members."""

    slices: tuple[MemberSlice, ...]
    group: str = ""
    member_seconds: float | None = None  # each slice's time budget (see .overrun)


@dataclass
class MemberWork:
    """What one member may do in the next batch."""

    member: Member
    topics: list[TopicInfo]
    live: list[int]
    base: dict[str, int]  # cursor per "topic#partition"
    ends: dict[str, int] = field(default_factory=dict)  # where its data in this batch ends
    final_seq: int | None = None  # its end-of-stream batch
    capped: bool = False  # it has more data than its row budget admits
    tick: int | None = None  # its windows' clock tick, due in this batch
    exit_note: str | None = None  # see MemberSlice


def _part_rows(part: InputPartition) -> int:
    if isinstance(part, TopicRange):
        return part.end - part.start
    if isinstance(part, InstanceRanges):
        return sum(r.end - r.start for r in part.ranges)
    return 1


def pack(
    items: list[tuple[MemberWork, InputPartition]],
    slots: int,
    group: str = "",
    member_seconds: float | None = None,
    alone: frozenset[str] = frozenset(),
) -> list[GroupTask]:
    """Deal ``items`` over at most ``slots`` tasks, the largest first onto the least loaded.

    The members named in ``alone`` get one task each, first: a batch run isolated
    after a failure (see :mod:`.suspects`).
    """
    isolated: dict[str, list[tuple[MemberWork, InputPartition]]] = {}
    for work, part in items:
        if work.member.control_id in alone:
            isolated.setdefault(work.member.control_id, []).append((work, part))
    items = [(w, p) for w, p in items if w.member.control_id not in alone]
    first = [
        task for cid in sorted(isolated) for task in pack(isolated[cid], 1, group, member_seconds)
    ]
    count = max(1, min(slots, len(items)))
    bins: list[list[tuple[MemberWork, InputPartition]]] = [[] for _ in range(count)]
    loads = [0] * count
    for work, part in sorted(items, key=lambda item: -_part_rows(item[1])):
        slot = loads.index(min(loads))
        bins[slot].append((work, part))
        loads[slot] += _part_rows(part)
    tasks = []
    for content in bins:
        by_member: dict[str, tuple[MemberWork, list[InputPartition]]] = {}
        for work, part in content:
            by_member.setdefault(work.member.control_id, (work, []))[1].append(part)
        slices = tuple(
            MemberSlice(
                w.member.control_id,
                w.member.epoch,
                w.member.version,
                w.member.spec,
                tuple(ps),
                w.capped,
                w.exit_note,
            )
            for w, ps in by_member.values()
        )
        if slices:
            tasks.append(GroupTask(slices, group, member_seconds))
    return first + tasks
