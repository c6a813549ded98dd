#!/usr/bin/python3
"""Produce delayed records with librdkafka (python3-confluent-kafka),
following only docs/kafka.md, "Producing from any language".

usage: produce_delayed.py BROKERS LADDER DESTINATION DELAY_MS...

LADDER is the delay_topics table as "seconds=topic,..." in increasing order.
Each DELAY_MS (an integer, negative for a record already due) makes one
record with key "py-N", a binary value and a user header; the script
prints one tab-separated line per record: id, due (ms), topic produced to.
It exits non-zero if any delivery report is an error.
"""
import sys
import time
import uuid

from confluent_kafka import Producer


def main():
    brokers, ladder_arg, destination = sys.argv[1:4]
    delays_ms = [int(a) for a in sys.argv[4:]]
    ladder = []
    for item in ladder_arg.split(","):
        seconds, topic = item.split("=", 1)
        ladder.append((float(seconds), topic))

    def bucket(remaining_s):
        # The smallest bucket when less than its delay remains, else the
        # largest bucket whose delay is <= the remaining delay.
        if remaining_s < ladder[0][0]:
            return ladder[0][1]
        return [topic for delay, topic in ladder if delay <= remaining_s][-1]

    p = Producer({"bootstrap.servers": brokers, "acks": "all", "enable.idempotence": True})
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(str(err))

    lines = []
    for i, delay_ms in enumerate(delays_ms):
        now_ns = time.time_ns()
        due_ns = now_ns + delay_ms * 1_000_000
        due_ms = -(-due_ns // 1_000_000)  # rounded up, never down
        remaining = (due_ms * 1_000_000 - now_ns) / 1e9
        topic = destination if remaining <= 0 else bucket(remaining)
        rid = str(uuid.uuid4())
        headers = [
            ("user", "py-%d" % i),
            ("ontime-due-ms", str(due_ms)),
            ("ontime-destination", destination),
            ("ontime-id", rid),
            ("ontime-timestamp-ms", str(now_ns // 1_000_000)),
        ]
        value = b"\x00\xffvalue-" + str(i).encode()
        p.produce(topic, value, ("py-%d" % i).encode(), headers=headers, on_delivery=report)
        p.poll(0)
        lines.append("%s\t%d\t%s" % (rid, due_ms, topic))
    left = p.flush(30)
    if left or errors:
        print("not delivered: %d; errors: %s" % (left, errors), file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
