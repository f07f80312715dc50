"""Pulsar's behaviour without a flag: the code decides (issue 29, point 2).

A function whose file imports ``pulsar``, a native function (no SDK), or a
class deriving from the real ``pulsar-client``'s ``Function`` gets Pulsar's
serde (IdentitySerDe on ``bytes`` topics) and secrets provider; a file that
imports ``sparkfn`` keeps sparkfn's; ``pulsar_compat`` (``pulsarCompat`` in
YAML) forces either. The real ``pulsar-client``, installed from PyPI into a
directory of its own for this test, changes no function's behaviour: each
case runs in a child process with that directory on ``PYTHONPATH``, as a
user's venv with it installed would have it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkfn import FunctionConfig
from sparkfn.runtime.function.rows import DLQ_EXCEPTION
from sparkfn.testing import FunctionHarness

PULSAR_FILE = "from pulsar import Function\n\nclass Shout(Function):\n    def process(self, input, context):\n        return input + '!'\n"
SPARKFN_FILE = "from sparkfn import Function\n\nclass Shout(Function):\n    def process(self, input, context):\n        return input + b'!'\n"
NATIVE_FILE = "def process(input):\n    return input + '!'\n"
SPARKFN_NATIVE = "import sparkfn\n\ndef process(input):\n    return input + b'!'\n"
# A sparkfn function whose helper imports pulsar: the import resolves, and sparkfn's rules stay.
HELPER_FILE = "from sparkfn import Function\nimport pulsar_helper\n\nclass Shout(Function):\n    def process(self, input, context):\n        return input + pulsar_helper.MARK\n"
HELPER = "import pulsar\n\nMARK = b'!' if pulsar.Function else b'?'\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "classname", "sent", "expected"),
    [
        (PULSAR_FILE, "Shout", b"hi", [b"hi!"]),  # bytes in, text out: IdentitySerDe
        (PULSAR_FILE, "Shout", b"41", None),  # int 41 + '!': a TypeError, negative-acked
        (NATIVE_FILE, None, b"hi", [b"hi!"]),
        (SPARKFN_FILE, "Shout", b"hi", [b"hi!"]),  # bytes in and out: sparkfn's own
        (SPARKFN_NATIVE, None, b"hi", [b"hi!"]),
    ],
    ids=["pulsar-import", "pulsar-identity-int", "native", "sparkfn-class", "sparkfn-native"],
)
def test_the_code_decides(
    tmp_path: Path, text: str, classname: str | None, sent: bytes, expected: list[bytes] | None
) -> None:
    path = _write(tmp_path, f"mode_{abs(hash(text)) % 10**8}", text)
    harness = FunctionHarness(
        path, classname=classname, input_schema="bytes", output_schema="bytes"
    )
    outputs = harness.send(sent)
    if expected is None:  # b"41" reached the function as the int 41
        assert outputs == []
        [(_, properties)] = harness.waiting  # delivered again later, as in Pulsar
        assert properties[DLQ_EXCEPTION].startswith("TypeError: unsupported operand"), properties
    else:
        assert outputs == expected


def test_a_helper_importing_pulsar_resolves_and_keeps_sparkfns_rules(tmp_path: Path) -> None:
    _write(tmp_path, "pulsar_helper", HELPER)
    path = _write(tmp_path, "helped", HELPER_FILE)
    harness = FunctionHarness(path, classname="Shout", input_schema="bytes", output_schema="bytes")
    assert harness.send(b"hi") == [b"hi!"]  # bytes in: sparkfn's rules, the file imports sparkfn


@pytest.mark.parametrize(("forced", "expected"), [(False, b"hi?"), (True, b"hi!")])
def test_pulsar_compat_overrides_the_code(tmp_path: Path, forced: bool, expected: bytes) -> None:
    # A duck-typed class with no SDK import: sparkfn's rules unless forced.
    text = (
        "class Either:\n    def process(self, input, context):\n"
        "        return input + ('!' if isinstance(input, str) else b'?')\n"
    )
    path = _write(tmp_path, f"either_{forced}", text)
    yaml = tmp_path / f"either_{forced}.yaml"
    yaml.write_text(
        f"name: either\npy: {path}\nclassName: either_{forced}.Either\ninputs: [in]\n"
        f"output: out\npulsarCompat: {str(forced).lower()}\n"
    )
    config = FunctionConfig.from_yaml(yaml)
    assert config.pulsar_compat is forced
    harness = FunctionHarness(config, input_schema="bytes", output_schema="bytes")
    assert harness.send(b"hi") == [expected]


CHILD = """
import json, sys
import pulsar  # the real pulsar-client, first on PYTHONPATH, imported before sparkfn
from sparkfn.testing import FunctionHarness

real = pulsar.__file__
results = {"real": real}
for name, classname in (("pulsar_file", "Shout"), ("native_file", None), ("sparkfn_file", "Shout")):
    harness = FunctionHarness(sys.argv[1] + f"/{name}.py", classname=classname,
                              input_schema="bytes", output_schema="bytes")
    results[name] = [v.decode() for v in harness.send(b"hi")]
    results[name + "_dead"] = len(harness.dead_letters)
print(json.dumps(results))
"""


def test_the_real_pulsar_client_changes_nothing(tmp_path: Path, pulsar_client: Path) -> None:
    _write(tmp_path, "pulsar_file", PULSAR_FILE)
    _write(tmp_path, "native_file", NATIVE_FILE)
    _write(tmp_path, "sparkfn_file", SPARKFN_FILE)
    env = {**os.environ, "PYTHONPATH": str(pulsar_client)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.splitlines()[-1])
    assert results["real"].startswith(str(pulsar_client)), results  # it was the real one
    # The Pulsar file's class derives from the real client's Function here: still Pulsar's rules.
    assert results["pulsar_file"] == ["hi!"] and results["pulsar_file_dead"] == 0, results
    assert results["native_file"] == ["hi!"] and results["native_file_dead"] == 0, results
    assert results["sparkfn_file"] == ["hi!"] and results["sparkfn_file_dead"] == 0, results
