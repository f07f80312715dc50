"""Secrets at rest: what a config holds in secret is stored encrypted, never as given.

A function's or connector's config is stored as JSON (the registry's
``function_versions`` rows). Before it is written, :func:`seal_config`
replaces each secret in it with a sealed value:

* every value of its ``secrets`` map (functions', sources' and sinks');
* every connector ``configs`` field marked sensitive
  (:func:`sparkfn.config.secrets.is_sensitive`: ``redisPassword``, a user
  connector's ``apiToken``), at any depth, and every URL in it that carries
  a password (the PostgreSQL connectors' ``url``).

A sealed value is the text ``sparkfn-sealed:v1:<key id>:<data>``: the value
(as JSON) encrypted with AES-256-GCM, authenticated together with its field's
path, so a value moved to another field or altered does not open.
:func:`open_config` turns them back when a config is read. A value without
that prefix is one an older sparkfn stored as given: it reads as it is, and is
sealed when the config is next written (or by :func:`reseal`, which the
worker runs when it starts).

The key (:class:`Sealer`) is, first, ``SPARKFN_SECRETS_KEY`` (for workers of
a cluster sharing a store, each given the same key), else the file
``secrets.key`` in the data directory, created 0600 with a random key the
first time something is sealed. Either holds one key or more (base64, one a
line or comma-separated): the first seals, every one opens, which is how a
key is rotated. A secret that opens with none of them is a
:class:`~sparkfn.api.errors.SecretsKeyError` naming the function or connector
and the field, never an empty or a wrong value.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import and_, select, update

from sparkfn.api.errors import SecretsKeyError
from sparkfn.config.secrets import has_url_password, is_sensitive
from sparkfn.store import registry_schema

if TYPE_CHECKING:
    from sparkfn.store.store import Store

log = logging.getLogger(__name__)

KEY_ENV = "SPARKFN_SECRETS_KEY"
"""The environment variable that gives the key (or keys), in place of the key file."""

KEY_FILE = "secrets.key"
"""The key file's name in the data directory."""

PREFIX = "sparkfn-sealed:v1:"
"""How a sealed value begins; a stored value without it is a plaintext of an older sparkfn."""

_NONCE = 12


def new_key() -> str:
    """A fresh random key, as its file and ``SPARKFN_SECRETS_KEY`` spell it."""
    return base64.urlsafe_b64encode(AESGCM.generate_key(bit_length=256)).decode()


def key_id(key: bytes) -> str:
    """The short name of ``key`` written in each value it seals (not a secret)."""
    return hashlib.sha256(key).hexdigest()[:12]


class Sealer:
    """Seals and opens secrets with the key of a data directory (see the module)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._keys: dict[str, bytes] | None = None
        self._current: str | None = None
        self._lock = threading.Lock()

    @property
    def key_file(self) -> Path:
        """Where the key is kept when ``SPARKFN_SECRETS_KEY`` is not set."""
        return self.data_dir / KEY_FILE

    def where(self) -> str:
        """Where the keys come from, for messages."""
        return KEY_ENV if os.environ.get(KEY_ENV) else str(self.key_file)

    def seal(self, value: Any, field: str) -> str:
        """``value`` (any JSON value) sealed for ``field`` with the current key."""
        kid, key = self._sealing_key()
        nonce = os.urandom(_NONCE)
        data = AESGCM(key).encrypt(nonce, json.dumps(value).encode(), field.encode())
        return f"{PREFIX}{kid}:{base64.urlsafe_b64encode(nonce + data).decode()}"

    def open(self, value: str, field: str, what: str) -> Any:
        """The value ``value`` sealed for ``field``; ``what`` names its owner in an error."""
        kid, _, data = value.removeprefix(PREFIX).partition(":")
        keys = self._load(create=False)
        key = keys.get(kid)
        if key is None:
            known = ", ".join(sorted(keys)) or "none"
            msg = (
                f"{what}: {field} is stored encrypted with key {kid}, which the worker does "
                f"not have (its keys, from {self.where()}: {known}); give the worker that key "
                f"in {KEY_FILE} or {KEY_ENV}"
            )
            raise SecretsKeyError(msg)
        try:
            raw = base64.urlsafe_b64decode(data)
            plain = AESGCM(key).decrypt(raw[:_NONCE], raw[_NONCE:], field.encode())
        except (InvalidTag, ValueError, binascii.Error) as exc:
            msg = (
                f"{what}: {field} is stored encrypted with key {kid} but does not open with "
                "it: the stored value was altered or moved from another field"
            )
            raise SecretsKeyError(msg) from exc
        return json.loads(plain)

    def current_id(self) -> str | None:
        """The id of the key that seals, or None when there is none yet."""
        keys = self._load(create=False)
        return self._current if keys else None

    def _sealing_key(self) -> tuple[str, bytes]:
        keys = self._load(create=True)
        assert self._current is not None
        return self._current, keys[self._current]

    def _load(self, *, create: bool) -> dict[str, bytes]:
        with self._lock:
            if self._keys is None or (create and not self._keys):
                text = os.environ.get(KEY_ENV, "").strip()
                if not text:
                    text = self._read_file(create=create)
                self._keys, self._current = _parse(text, self.where())
            return self._keys

    def _read_file(self, *, create: bool) -> str:
        path = self.key_file
        try:
            return path.read_text()
        except FileNotFoundError:
            if not create:
                return ""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it meanwhile: use theirs
            return path.read_text()
        with os.fdopen(fd, "w") as handle:
            handle.write(new_key() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return path.read_text()


def _parse(text: str, where: str) -> tuple[dict[str, bytes], str | None]:
    keys: dict[str, bytes] = {}
    current = None
    for word in text.replace(",", "\n").split():
        try:
            key = base64.urlsafe_b64decode(word)
        except (ValueError, binascii.Error):
            key = b""
        if len(key) != 32:
            msg = f"secrets key in {where} is not a base64 256-bit key (found {len(word)} chars)"
            raise SecretsKeyError(msg)
        kid = key_id(key)
        keys[kid] = key
        current = current or kid
    return keys, current


def is_sealed(value: Any) -> bool:
    """Whether ``value`` is a sealed value."""
    return isinstance(value, str) and value.startswith(PREFIX)


def seal_config(config: Mapping[str, Any], sealer: Sealer) -> dict[str, Any]:
    """The stored JSON ``config`` with each secret in it sealed (see the module)."""
    return _walk(config, lambda value, field: _seal_one(sealer, value, field))


def open_config(config: Mapping[str, Any], sealer: Sealer, what: str) -> dict[str, Any]:
    """The stored JSON ``config`` with each sealed value opened; ``what`` names its owner."""
    return _walk(config, lambda value, field: _open_one(sealer, value, field, what))


def needs_sealing(config: Mapping[str, Any], sealer: Sealer) -> bool:
    """Whether ``config`` holds a secret in the clear or sealed with a key not the current."""
    found: list[bool] = []

    def look(value: Any, _field: str) -> Any:
        if not is_sealed(value):
            found.append(True)
        elif value.removeprefix(PREFIX).partition(":")[0] != sealer.current_id():
            found.append(True)
        return value

    _walk(config, look)
    return bool(found)


def _seal_one(sealer: Sealer, value: Any, field: str) -> Any:
    if is_sealed(value):
        return value
    return sealer.seal(value, field)


def _open_one(sealer: Sealer, value: Any, field: str, what: str) -> Any:
    return sealer.open(value, field, what) if is_sealed(value) else value


def _url_with_password(value: Any) -> bool:
    return isinstance(value, str) and has_url_password(value)


def _walk(config: Mapping[str, Any], each: Any) -> dict[str, Any]:
    out = dict(config)
    secrets = config.get("secrets")
    if isinstance(secrets, Mapping):
        out["secrets"] = {
            key: value if value is None else each(value, f"secrets.{key}")
            for key, value in secrets.items()
        }
    configs = config.get("configs")
    if isinstance(configs, Mapping):
        out["configs"] = _walk_configs(configs, "configs", each)
    return out


def _walk_configs(configs: Mapping[str, Any], path: str, each: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in configs.items():
        field = f"{path}.{key}"
        if value is None:
            out[key] = None
        elif is_sensitive(key) or is_sealed(value) or _url_with_password(value):
            out[key] = each(value, field)
        elif isinstance(value, Mapping):
            out[key] = _walk_configs(value, field, each)
        else:
            out[key] = value
    return out


def reseal(store: Store) -> int:
    """Seal, with the current key, every stored config secret that is not: the clear
    values an older sparkfn stored, and those sealed with an earlier key (a rotation).

    Returns how many config versions were rewritten. Run by the worker as it starts.
    A version with a secret that opens with none of the keys is left as it is, and
    logged: reading it answers the same :class:`SecretsKeyError` until the key is given.
    """
    table = registry_schema.function_versions
    sealer = store.sealer
    sealer.current_id()  # a key given that is no key stops the worker's start, before any use
    with store.read() as conn:
        rows = conn.execute(select(table.c.fqfn, table.c.version, table.c.config)).all()
    stale = [row for row in rows if needs_sealing(json.loads(row.config), sealer)]
    done = 0
    for row in stale:
        what = f"config {row.fqfn} version {row.version}"
        try:
            fresh = seal_config(open_config(json.loads(row.config), sealer, what), sealer)
        except SecretsKeyError as exc:
            log.error("not re-sealed: %s", exc)
            continue
        with store.write() as conn:
            conn.execute(
                update(table)
                .where(and_(table.c.fqfn == row.fqfn, table.c.version == row.version))
                .values(config=json.dumps(fresh))
            )
        done += 1
    return done
