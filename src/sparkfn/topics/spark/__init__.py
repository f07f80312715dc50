"""The ``sparkfn`` Spark data source: topics as a Structured Streaming source and sink.

* :mod:`.source`: ``format("sparkfn")`` and its options;
* :mod:`.reader`: the stream reader (offsets, caps, subscriptions);
* :mod:`.planning`: pure batch planning (caps, ranges per instance, a
  drain's last batch);
* :mod:`.rows`: what a read task reads (its ranges, end-of-stream markers);
* :mod:`.tasks`: what every read task does once per process (freezing its imports);
* :mod:`.writer`: the exactly-once topic sink;
* :mod:`.commit`: staging rows as segments and committing them once.
"""
