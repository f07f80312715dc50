"""The main job on the embedded default: the word-count function on Spark.

Run it with ``make demo``. In a scratch data directory it creates two topics,
produces sample sentences, runs ``examples/wordcount.py`` as a sparkfn
function (a Spark Structured Streaming query: topic source -> the function
with its Context -> one-transaction sink, effectively once) until the input
is drained, then prints what arrived on the output topic, the function's
counters and its status.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from sparkfn import Consumer, FunctionConfig, LocalRun, Producer, Store, TopicAdmin

HERE = Path(__file__).resolve().parent
SENTENCES = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "the dog sleeps",
    "pulsar functions on spark",
    "spark runs the functions",
]


def main() -> int:
    """Run the demo in a scratch data directory and print the results."""
    data_dir = Path(tempfile.mkdtemp(prefix="sparkfn-demo-"))
    try:
        store = Store.open(None, data_dir)
        admin = TopicAdmin(store)
        admin.create("sentences", partitions=2, schema_type="string")
        admin.create("echo", partitions=2, schema_type="string")
        producer = Producer(store, "sentences")
        producer.send_batch(producer.encode(SENTENCES))
        print(f"produced {len(SENTENCES)} sentences to public/default/sentences")

        config = FunctionConfig.build(
            name="wordcount",
            py=str(HERE / "wordcount.py"),
            classname="wordcount.WordCount",
            inputs=["sentences"],
            output="echo",
            subscription_position="earliest",
            processing_guarantees="effectively_once",
        )
        print("running public/default/wordcount on Spark until the input is drained ...")
        with LocalRun(config, store=store, spark_master="local[2]") as run:
            run.start(until_drained=True)
            run.wait()
            received = Consumer(store, "echo", initial_position="earliest").receive(
                max_messages=100
            )
            print("\npublic/default/echo:")
            for message in sorted(received, key=lambda m: (m.partition, m.offset)):
                print(f"  {message.message_id:>5}  {message.value.decode()}")
            counters = {
                key: state.counter
                for key, state in run.state().items()
                if state.counter is not None
            }
            print("\ncounters:")
            for word, count in sorted(counters.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"  {word:<10} {count}")
            status = run.status()
            processed = sum(i.status.num_successfully_processed for i in status.instances)
            print(f"\nstatus: {processed} processed, state {status.instances[0].status.state}")
        store.close()
        expected_words = sum(len(s.split()) for s in SENTENCES)
        ok = len(received) == len(SENTENCES) and sum(counters.values()) == expected_words
        return 0 if ok else 1
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
