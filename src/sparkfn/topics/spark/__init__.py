"""The ``sparkfn`` Spark data source: topics as a Structured Streaming source and sink.

* :mod:`.source`: ``format("sparkfn")`` and its options;
* :mod:`.reader`: the stream reader (offsets, admission, subscriptions);
* :mod:`.planning`: pure batch planning (caps, ranges per instance, a
  drain's last batch);
* :mod:`.rows`: what a read task reads (its ranges, end-of-stream markers);
* :mod:`.admission`: the small interface a supervisor implements to steer
  what the reader admits (drain, suspend, dead instances);
* :mod:`.writer`: the exactly-once topic sink;
* :mod:`.commit`: staging rows as segments and committing them once.
"""
