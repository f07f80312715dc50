"""A ``topics_pattern``: one literal namespace, and a regular expression over its topics.

As Pulsar's pattern consumers do, a pattern starts with its namespace
written out, ``[persistent://]tenant/namespace/``, and only that namespace's
topics are ever listed for it: whatever the rest of the regex says
(``acme/app/out|evil/.*``), it reads no topic outside ``acme/app``. The
regex must match a topic's whole name, ``tenant/namespace/name``. A pattern
without any ``/`` is in ``public/default``, as a bare topic name is.

>>> pattern = TopicsPattern.parse("persistent://acme/sales/audit-.*")
>>> pattern.namespace, pattern.matches("acme/sales/audit-eu"), pattern.matches("evil/x/audit-1")
('acme/sales', True, False)
>>> TopicsPattern.parse("audit-.*").namespace
'public/default'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparkfn.api.errors import ConfigError
from sparkfn.config.names import DEFAULT_NAMESPACE, DEFAULT_TENANT, TopicName

STORED_CONTEXT = "stored"
"""The validation context key a registry sets when it reads a config back from its store."""

# A part of the literal prefix: name characters, a '.' escaped or not.
_PART = r"(?:[A-Za-z0-9_\-]|\\\.|\.)+"
_PREFIX = re.compile(rf"(?:(?:non-)?persistent://)?({_PART})/({_PART})/")
_SCHEME = re.compile(r"^(?:non-)?persistent://")
# What, right after the prefix's '/', would make that '/' optional or repeated.
_QUANTIFIERS = frozenset("?*+{")


@dataclass(frozen=True)
class TopicsPattern:
    """A parsed ``topics_pattern``: its namespace (``tenant/namespace``) and its regex."""

    text: str
    tenant: str
    namespace_name: str
    regex: re.Pattern[str]

    @classmethod
    def parse(cls, text: str, *, field: str = "topics_pattern") -> TopicsPattern:
        """Parse ``text``; :class:`ConfigError` naming ``field`` unless it names one namespace."""
        try:
            regex = re.compile(_SCHEME.sub("", text))
        except re.error as exc:
            msg = f"{field} {text!r} is not a valid regular expression: {exc}"
            raise ConfigError(msg) from None
        if "/" not in text:
            return cls(text, DEFAULT_TENANT, DEFAULT_NAMESPACE, re.compile(_bare(regex.pattern)))
        prefix = _PREFIX.match(text)
        if prefix is None or text[prefix.end() : prefix.end() + 1] in _QUANTIFIERS:
            msg = (
                f"{field} {text!r} must start with its namespace written out, "
                "'tenant/namespace/' (as Pulsar's 'persistent://tenant/namespace/regex'), "
                "or have no '/' to mean public/default; its topics are listed in that "
                "namespace only"
            )
            raise ConfigError(msg)
        tenant, namespace = (part.replace("\\.", ".") for part in prefix.groups())
        checked = TopicName.parse(f"{tenant}/{namespace}/x", field=field)
        return cls(text, checked.tenant, checked.namespace, regex)

    @property
    def namespace(self) -> str:
        """``tenant/namespace``: the only namespace whose topics this pattern is matched against."""
        return f"{self.tenant}/{self.namespace_name}"

    def matches(self, topic: str | TopicName) -> bool:
        """Whether ``topic`` (``tenant/namespace/name``) is in the namespace and the regex matches it."""
        name = str(topic)
        return name.startswith(f"{self.namespace}/") and self.regex.fullmatch(name) is not None

    def confined(self) -> bool:
        """Whether every alternative of the regex starts with the namespace, as literal text.

        The namespace alone already confines what is read; this says whether
        the text, too, asks for nothing else (``acme/app/a|evil/.*`` does).
        """
        if "/" not in self.text:
            return True
        prefixes = {_PREFIX.match(branch) for branch in _top_level_branches(self.text)}
        return None not in prefixes and {
            (p.group(1).replace("\\.", "."), p.group(2).replace("\\.", "."))
            for p in prefixes
            if p is not None
        } == {(self.tenant, self.namespace_name)}


def _bare(regex: str) -> str:
    """A regex over a bare name, made one over ``public/default/<name>``."""
    return f"{re.escape(DEFAULT_TENANT)}/{re.escape(DEFAULT_NAMESPACE)}/(?:{regex})"


def _top_level_branches(regex: str) -> list[str]:
    """``regex`` split at each ``|`` outside groups, classes and escapes."""
    branches, start, depth, i = [], 0, 0, 0
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            i += 1
        elif char == "[":
            i = _class_end(regex, i)
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            branches.append(regex[start:i])
            start = i + 1
        i += 1
    branches.append(regex[start:])
    return branches


def _class_end(regex: str, start: int) -> int:
    """The index of the ``]`` that closes the character class opened at ``start``."""
    i = start + 1
    if regex[i : i + 1] == "^":
        i += 1
    if regex[i : i + 1] == "]":  # a ']' first in a class is literal
        i += 1
    while i < len(regex) and regex[i] != "]":
        i += 2 if regex[i] == "\\" else 1
    return i


def check_config_pattern(text: str, context: Any) -> None:
    """Parse a config's ``topics_pattern``, at create and update: a :class:`ConfigError` if bad.

    A config read back from the store (``context`` holds :data:`STORED_CONTEXT`)
    may have been written before a pattern had to name its namespace
    (``acme/.*``). It still reads, so that the function or sink can be listed,
    shown, updated to a good pattern or deleted; its run fails at start, where
    discovery parses the pattern again, with this same message in its status.
    """
    try:
        TopicsPattern.parse(text)
    except ConfigError:
        if not (isinstance(context, dict) and context.get(STORED_CONTEXT)):
            raise
