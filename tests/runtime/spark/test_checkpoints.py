"""Streaming checkpoint files without Hadoop's ``chmod`` per file: the class, built by javac.

The session's checkpoint manager is sparkfn's (its jar on the driver's class
path) where a JDK's ``javac`` builds it; without one, or when the build fails,
Spark's FileSystem-based manager as before; a user's own manager wins.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sparkfn.runtime.spark import checkpoints

FILE_SYSTEM_MANAGER = checkpoints.SPARK_MANAGER


@pytest.fixture
def fresh_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The jar built anew under ``tmp_path`` (not the one the sessions use)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    checkpoints.built_jar.cache_clear()
    yield tmp_path
    checkpoints.built_jar.cache_clear()


def test_the_session_writes_its_checkpoints_through_sparkfns_manager(spark: SparkSession) -> None:
    assert spark.conf.get(checkpoints.MANAGER_KEY) == checkpoints.MANAGER_CLASS
    jar = str(checkpoints.jar_path())
    assert jar in spark.sparkContext.getConf().get(checkpoints.CLASS_PATH_KEY, "")


def test_the_jar_is_built_once_with_the_class(fresh_build: Path) -> None:
    jar = checkpoints.built_jar()
    assert jar is not None and jar.parent == fresh_build / "sparkfn"
    with zipfile.ZipFile(jar) as archive:
        assert archive.namelist() == ["sparkfn/spark/LocalCheckpointFileManager.class"]
    conf = checkpoints.session_conf(
        {"spark.driver.extraClassPath": "/opt/mine.jar"}, launching=True
    )
    assert conf == {
        checkpoints.MANAGER_KEY: checkpoints.MANAGER_CLASS,
        checkpoints.CLASS_PATH_KEY: f"/opt/mine.jar:{jar}",  # the user's entries kept, first
    }


def test_without_javac_the_session_keeps_sparks_manager(
    fresh_build: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    empty = fresh_build / "empty"
    empty.mkdir()
    monkeypatch.setenv("JAVA_HOME", str(empty))
    monkeypatch.setenv("PATH", str(empty))
    with caplog.at_level(logging.INFO, logger=checkpoints.__name__):
        assert checkpoints.session_conf({}, launching=True) == {}
    assert "no javac found" in caplog.text


def test_a_failed_build_keeps_sparks_manager(
    fresh_build: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = fresh_build / "LocalCheckpointFileManager.java"
    broken.write_text("package sparkfn.spark; public class LocalCheckpointFileManager {")
    monkeypatch.setattr(checkpoints, "SOURCE", broken)
    assert checkpoints.session_conf({}, launching=True) == {}
    assert "could not compile LocalCheckpointFileManager.java" in caplog.text
    assert not list(fresh_build.rglob("*.jar"))


def test_a_users_own_manager_wins() -> None:
    mine = {checkpoints.MANAGER_KEY: "com.example.MyManager"}
    assert checkpoints.session_conf(mine, launching=True) == {}
    # Spark's default named by the user is not a choice of theirs: sparkfn's is faster.
    assert checkpoints.session_conf({checkpoints.MANAGER_KEY: FILE_SYSTEM_MANAGER}, launching=True)
