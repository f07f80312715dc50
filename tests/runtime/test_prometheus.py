"""The Prometheus collector and endpoint of a function, with exact sample values.

Stats are committed through the sink's own code path (``commit_stats``) on
both store backends; one test runs a real function on the session's Spark
and checks what the endpoint shows against what the function did.
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from sparkfn.api.errors import ConfigError
from sparkfn.api.lifecycle import DeathCause
from sparkfn.config.function import FunctionConfig
from sparkfn.runtime.lifecycle import control
from sparkfn.runtime.metrics_store import commit_stats
from sparkfn.runtime.prometheus import FunctionMetricsCollector, metric_name, serve_metrics
from sparkfn.runtime.stats import InstanceStats
from sparkfn.store.store import Store
from sparkfn.topics.admin import TopicAdmin
from sparkfn.topics.producer import Producer

RECORDS_METRICS = """
def process(input, context):
    context.record_metric("length", len(input))
    context.record_metric("p99 ms", 2.5)
    if input == "boom":
        raise ValueError("boom")
    return input + "!"
"""


def _config(**fields: object) -> FunctionConfig:
    base: dict[str, object] = {
        "tenant": "acme",
        "namespace": "sales",
        "name": "scorer",
        "py": "scorer.py",
        "inputs": ["orders"],
        "parallelism": 3,
    }
    return FunctionConfig.build(**{**base, **fields})


def _labels(instance: int, config: FunctionConfig) -> dict[str, str]:
    return {
        "tenant": config.tenant,
        "namespace": config.namespace,
        "name": config.name,
        "instance_id": str(instance),
    }


def _stats(
    received: int,
    processed: int,
    user: int,
    system: int,
    dead: int,
    latency: float,
    last: int,
    metrics: dict[str, list[float]],
) -> InstanceStats:
    stats = InstanceStats(
        received=received,
        processed_successfully=processed,
        user_exceptions=user,
        system_exceptions=system,
        dead_lettered=dead,
        latency_ms_sum=latency,
        latency_count=processed,
        last_invocation_ms=last,
    )
    for name, values in metrics.items():
        for value in values:
            stats.record_metric(name, value)
    return stats


def _registry(store: Store, config: FunctionConfig) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(FunctionMetricsCollector(store, config))
    return registry


def test_committed_stats_are_exposed_per_instance_with_pulsar_names(store: Store) -> None:
    config = _config()
    fqfn = config.fqfn
    # Two batches for instance 0, one for instance 1; instance 2 never ran.
    with store.write() as conn:
        commit_stats(
            conn,
            fqfn,
            [
                (0, _stats(10, 8, 2, 0, 1, 4.0, 1_000, {"score": [1.0, 5.0]})),
                (1, _stats(4, 4, 0, 1, 0, 2.0, 2_000, {"score": [3.0], "p99 ms": [7.5]})),
            ],
        )
    with store.write() as conn:
        commit_stats(conn, fqfn, [(0, _stats(5, 5, 0, 0, 0, 1.0, 3_000, {"score": [-2.0]}))])
    # The run's lifecycle record: instance 0 restarted twice, instance 1 died of a fatal error.
    epoch = control.begin_run(store, fqfn, "function", 3, "started")
    control.count_restart(store, fqfn, [0])
    control.count_restart(store, fqfn, [0])
    boom = DeathCause("ValueError", "boom", "", "fatal", "worker")
    control.record_death(store, fqfn, 1, boom, fatal=True, epoch=epoch)
    registry = _registry(store, config)

    def value(name: str, instance: int) -> float | None:
        return registry.get_sample_value(name, _labels(instance, config))

    expected = {
        "sparkfn_function_received_total": (15, 4, 0),
        "sparkfn_function_processed_successfully_total": (13, 4, 0),
        "sparkfn_function_user_exceptions_total": (2, 0, 0),
        "sparkfn_function_system_exceptions_total": (0, 1, 0),
        "sparkfn_function_dead_lettered_total": (1, 0, 0),
        "sparkfn_function_restarts_total": (2, 0, 0),
        "sparkfn_function_fatal_exceptions_total": (0, 1, 0),
        "sparkfn_function_process_latency_ms_sum": (5.0, 2.0, 0),
        "sparkfn_function_process_latency_ms_count": (13, 4, 0),
        "sparkfn_function_last_invocation": (3_000, 2_000, 0),
        # Everything was committed within the last minute.
        "sparkfn_function_received_total_1min": (15, 4, 0),
        "sparkfn_function_processed_successfully_total_1min": (13, 4, 0),
        "sparkfn_function_user_exceptions_total_1min": (2, 0, 0),
        "sparkfn_function_system_exceptions_total_1min": (0, 1, 0),
        "sparkfn_function_process_latency_ms_1min_sum": (5.0, 2.0, 0),
        "sparkfn_function_process_latency_ms_1min_count": (13, 4, 0),
        "sparkfn_function_user_metric_score_count": (3, 1, None),
        "sparkfn_function_user_metric_score_sum": (4.0, 3.0, None),
        "sparkfn_function_user_metric_score_min": (-2.0, 3.0, None),
        "sparkfn_function_user_metric_score_max": (5.0, 3.0, None),
        "sparkfn_function_user_metric_p99_ms_count": (None, 1, None),
        "sparkfn_function_user_metric_p99_ms_sum": (None, 7.5, None),
        "sparkfn_function_user_metric_p99_ms_min": (None, 7.5, None),
        "sparkfn_function_user_metric_p99_ms_max": (None, 7.5, None),
    }
    for name, per_instance in expected.items():
        got = tuple(value(name, i) for i in range(3))
        assert got == per_instance, f"{name}: {got} != {per_instance}"
        # The same under Pulsar's name, for dashboards made for Pulsar Functions.
        pulsars = name.replace("sparkfn_function_", "pulsar_function_", 1)
        assert tuple(value(pulsars, i) for i in range(3)) == per_instance, pulsars

    # A later batch shows on the next scrape: nothing is cached.
    with store.write() as conn:
        commit_stats(conn, fqfn, [(2, _stats(1, 1, 0, 0, 0, 0.5, 4_000, {}))])
    assert value("sparkfn_function_received_total", 2) == 1
    assert value("sparkfn_function_last_invocation", 2) == 4_000


def test_the_metric_types_and_other_functions_are_kept_apart(store: Store) -> None:
    config = _config(parallelism=1)
    other = _config(name="other", parallelism=1)
    with store.write() as conn:
        commit_stats(conn, other.fqfn, [(0, _stats(9, 9, 0, 0, 0, 1.0, 1, {"x": [1.0]}))])
    families = {m.name: m.type for m in FunctionMetricsCollector(store, config).collect()}
    ours = {k: v for k, v in families.items() if k.startswith("sparkfn_")}
    pulsars = {k.replace("pulsar_", "sparkfn_", 1): v for k, v in families.items() if k not in ours}
    assert pulsars == ours
    assert ours == {
        "sparkfn_function_received": "counter",
        "sparkfn_function_processed_successfully": "counter",
        "sparkfn_function_user_exceptions": "counter",
        "sparkfn_function_system_exceptions": "counter",
        "sparkfn_function_dead_lettered": "counter",
        "sparkfn_function_process_latency_ms": "summary",
        "sparkfn_function_last_invocation": "gauge",
        "sparkfn_function_received_total_1min": "gauge",
        "sparkfn_function_processed_successfully_total_1min": "gauge",
        "sparkfn_function_user_exceptions_total_1min": "gauge",
        "sparkfn_function_system_exceptions_total_1min": "gauge",
        "sparkfn_function_process_latency_ms_1min": "summary",
    }
    registry = _registry(store, config)
    assert registry.get_sample_value("sparkfn_function_received_total", _labels(0, config)) == 0


def test_user_metric_names_are_made_valid() -> None:
    assert metric_name("latency") == "sparkfn_function_user_metric_latency"
    assert metric_name("p99 ms/req-x") == "sparkfn_function_user_metric_p99_ms_req_x"


def _scrape(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("instance_id", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_endpoint_serves_only_this_function_and_stops(store: Store) -> None:
    config = _config(parallelism=2)
    with store.write() as conn:
        commit_stats(conn, config.fqfn, [(1, _stats(3, 2, 1, 0, 1, 0.6, 7, {"n": [2.0]}))])
    server = serve_metrics(0, store, config, addr="127.0.0.1")
    try:
        samples = _scrape(server.port)
        assert samples[("sparkfn_function_received_total", "0")] == 0
        assert samples[("sparkfn_function_received_total", "1")] == 3
        assert samples[("sparkfn_function_user_exceptions_total", "1")] == 1
        assert samples[("sparkfn_function_dead_lettered_total", "1")] == 1
        assert samples[("sparkfn_function_user_metric_n_max", "1")] == 2.0
        # A private registry: no process or platform collectors of the default one.
        assert all(
            name.startswith(("sparkfn_function_", "pulsar_function_")) for name, _ in samples
        )
        assert samples[("pulsar_function_received_total", "1")] == 3
    finally:
        server.close()
    server.close()  # idempotent
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        _scrape(server.port)


def test_a_busy_port_is_a_config_error(store: Store) -> None:
    config = _config()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            serve_metrics(port, store, config, addr="127.0.0.1")


@pytest.mark.slow
def test_a_real_run_shows_on_the_endpoint(spark: object, data_dir: Path, tmp_path: Path) -> None:
    from sparkfn.runtime.function_run import FunctionRun

    code = tmp_path / "records_metrics.py"
    code.write_text(RECORDS_METRICS)
    inputs = ["a", "bb", "boom", "dddd"]
    store = Store.open(f"sqlite:///{data_dir}/sparkfn.db", data_dir)
    try:
        admin = TopicAdmin(store)
        admin.create("in", partitions=1, schema_type="string")
        admin.create("out", partitions=1, schema_type="string")
        producer = Producer(store, "in")
        producer.send_batch(producer.encode(inputs))
        config = FunctionConfig.build(
            name="measured",
            py=str(code),
            inputs=["in"],
            output="out",
            subscription_position="earliest",
            max_message_retries=0,  # dead-lettered at its one failure
        )
        with (
            FunctionRun(config, store=store, spark=spark) as run,
            serve_metrics(0, store, config, addr="127.0.0.1") as server,
        ):
            run.start(until_drained=True)
            assert run.wait(timeout=180), "the run did not drain within 180 s"
            samples = _scrape(server.port)
    finally:
        store.close()

    def sample(name: str) -> float:
        return samples[(f"sparkfn_function_{name}", "0")]

    assert sample("received_total") == 4
    assert sample("processed_successfully_total") == 3
    assert sample("user_exceptions_total") == 1
    assert sample("system_exceptions_total") == 0
    assert sample("dead_lettered_total") == 1  # to the default {name}-DLQ topic
    assert sample("restarts_total") == 0
    assert sample("process_latency_ms_count") == 3
    assert sample("process_latency_ms_sum") > 0
    assert sample("last_invocation") > 0
    assert sample("received_total_1min") == 4
    # Metrics recorded by a message that then failed are discarded with it.
    assert sample("user_metric_length_count") == 3
    assert sample("user_metric_length_sum") == 1 + 2 + 4
    assert sample("user_metric_length_min") == 1
    assert sample("user_metric_length_max") == 4
    assert sample("user_metric_p99_ms_count") == 3
    assert sample("user_metric_p99_ms_sum") == 7.5
