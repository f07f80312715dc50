"""Pulsar's ``producerConfig`` on sparkfn: what of it is honoured, what is refused.

A function's outputs (returned or published) are appended as segments in
its batch's commit, with no Pulsar producer. Of Pulsar's producer settings:

* ``compressionType`` is honoured: ``NONE``, ``LZ4`` or ``ZSTD`` is how the
  segments the function writes compress (default: LZ4 when the values
  compress well). ``ZLIB`` and ``SNAPPY`` are refused: segments are Arrow
  IPC, which has no such codec.
* ``useThreadLocalProducers`` is accepted either way: every thread's publish
  commits with the batch, as it would through one producer.
* ``batchBuilder: DEFAULT`` and ``batchingConfig.batchingEnabled: true``
  are accepted: they describe what sparkfn does (a batch's outputs are
  written together).
* Anything asking for what sparkfn has not (a pending-message queue bound,
  end-to-end encryption, key-based batches, unbatched sends, batching
  delays and sizes) is refused with an error naming the field: ignoring it
  would change what the user asked for behind their back.

>>> ProducerConfig(compressionType="ZSTD").compression
'zstd'
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

_CODECS = {"none": None, "lz4": "lz4", "zstd": "zstd"}
_NO_CODEC = ("zlib", "snappy")
_BATCHING = (
    "batchingEnabled",
    "batchingMaxPublishDelayMs",
    "roundRobinRouterBatchingPartitionSwitchFrequency",
    "batchingMaxMessages",
    "batchingMaxBytes",
    "batchBuilder",
)


class ProducerConfig(BaseModel):
    """The part of Pulsar's ``ProducerConfig`` that sparkfn can honour (see the module)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    compression_type: str | None = None
    use_thread_local_producers: bool | None = None
    max_pending_messages: int | None = Field(default=None)
    max_pending_messages_across_partitions: int | None = Field(default=None)
    crypto_config: dict[str, Any] | None = None
    batch_builder: str | None = None
    batching_config: dict[str, Any] | None = None

    @field_validator("compression_type", mode="before")
    @classmethod
    def _codec(cls, value: Any) -> Any:
        if value is None:
            return None
        text = str(value).strip().lower()
        if text in _NO_CODEC:
            msg = (
                f"compressionType {value!r}: sparkfn's segments are Arrow IPC, which compresses "
                "with LZ4 or ZSTD only (or NONE)"
            )
            raise ValueError(msg)
        if text not in _CODECS:
            msg = f"compressionType {value!r} is none of NONE, LZ4, ZSTD"
            raise ValueError(msg)
        return text

    @model_validator(mode="after")
    def _refuse(self) -> ProducerConfig:
        for name, value in (
            ("maxPendingMessages", self.max_pending_messages),
            ("maxPendingMessagesAcrossPartitions", self.max_pending_messages_across_partitions),
        ):
            if value:
                msg = (
                    f"{name} {value}: sparkfn has no producer queue to bound (outputs are "
                    "staged in the task and committed with the batch); bound a batch with "
                    "max_records_per_batch"
                )
                raise ValueError(msg)
        if self.crypto_config:
            msg = "cryptoConfig: sparkfn topics are not end-to-end encrypted; refusing to write in clear"
            raise ValueError(msg)
        self._check_builder("batchBuilder", self.batch_builder)
        batching = self.batching_config or {}
        for key, value in batching.items():
            if key not in _BATCHING:
                msg = f"batchingConfig.{key}: not a field of Pulsar's BatchingConfig"
                raise ValueError(msg)
            if value is None:
                continue
            if key == "batchingEnabled":
                if value is not True and str(value).lower() != "true":
                    msg = (
                        "batchingConfig.batchingEnabled false: sparkfn writes a batch's outputs "
                        "together; there are no single-message sends"
                    )
                    raise ValueError(msg)
            elif key == "batchBuilder":
                self._check_builder("batchingConfig.batchBuilder", value)
            else:
                msg = (
                    f"batchingConfig.{key}: sparkfn's output batches are its micro-batches "
                    "(see max_records_per_batch and trigger_interval), not tuned per producer"
                )
                raise ValueError(msg)
        return self

    @staticmethod
    def _check_builder(field: str, value: Any) -> None:
        if value is not None and str(value).strip().upper() not in ("", "DEFAULT"):
            msg = (
                f"{field} {value!r}: sparkfn has only the DEFAULT batches (a key's messages "
                "keep their order in their partition)"
            )
            raise ValueError(msg)

    @property
    def compression(self) -> Literal["lz4", "zstd"] | None | Literal["auto"]:
        """The segments' codec: ``lz4``, ``zstd``, ``None`` (NONE) or ``auto`` (not set)."""
        if self.compression_type is None:
            return "auto"
        codec = _CODECS[self.compression_type]
        return None if codec is None else ("lz4" if codec == "lz4" else "zstd")
