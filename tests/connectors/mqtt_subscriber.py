"""A QoS 1 subscriber with a persistent session, in a process of its own: what the
``mqtt`` sink crash test counts the sink's messages with.

    python mqtt_subscriber.py HOST PORT TOPIC CLIENT_ID OUT_FILE

Appends each payload to ``OUT_FILE`` (one line each, flushed per message) and
prints ``subscribed`` once the broker acknowledged the subscription. Mosquitto
drops messages for a session more than ``max_queued_messages`` (1000) behind;
a process of its own, doing nothing but this, keeps up with a sink that
publishes batches smaller than that. A message whose write fails is not
acknowledged (paho's manual acks), so the broker sends it again on reconnect.
It runs until killed (SIGTERM disconnects, keeping the session).
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion


def main(host: str, port: int, topic: str, client_id: str, path: str) -> None:
    done = threading.Event()
    out = open(path, "a", encoding="utf-8")  # noqa: SIM115 -- open until the process ends
    client = paho.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=False,
        manual_ack=True,
    )

    def connected(c: paho.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            print(f"connect refused: {reason}", flush=True)
            done.set()
            return
        c.subscribe(topic, qos=1)

    def subscribed(_c: paho.Client, _u: Any, _mid: int, codes: Any, _p: Any) -> None:
        print(f"subscribed {[str(c) for c in codes]}", flush=True)

    def message(c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        out.write(msg.payload.decode() + "\n")
        out.flush()
        c.ack(msg.mid, msg.qos)

    client.on_connect = connected
    client.on_subscribe = subscribed
    client.on_message = message
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    client.connect(host, port, keepalive=60)
    client.loop_start()
    done.wait()
    client.disconnect()
    client.loop_stop()
    out.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
