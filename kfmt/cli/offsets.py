"""kfmt offsets: the committed offsets of every group (classic, consumer, share, streams), read from
`__consumer_offsets` (and a share group's start offsets from `__share_group_state`)."""
from __future__ import annotations

import warnings

from kfmt.cli._common import add_format_argument, add_storage_arguments, dumps
from kfmt.errors import KfmtWarning, UsageError

NAME = "offsets"
HELP = ("the last committed offset of every group (classic, consumer, share, streams), topic and "
        "partition, replayed from a copy of __consumer_offsets (and __share_group_state) as a broker "
        "loads it")
TOPIC = "__consumer_offsets"
SHARE_STATE_TOPIC = "__share_group_state"
COLUMNS = ("GROUP", "TOPIC", "PARTITION", "OFFSET", "LEADER-EPOCH", "COMMIT-TIMESTAMP", "METADATA",
           "GROUP-TYPE")


def topic_partitions(storage, path: str, given: str, topic: str = TOPIC, required: bool = True) -> list:
    """PATH itself if it is a TOPIC-N directory, else its TOPIC-N children (other partitions of a
    log directory are not looked at); none found, or none holding a Kafka file, is a usage error when
    `required` (and then one line: the listing's warnings are held back, kfmt.errors.warned_on_success)."""
    from kfmt.errors import warned_on_success

    return warned_on_success(_topic_partitions, storage, path, given, topic, required)


def _topic_partitions(storage, path: str, given: str, topic: str, required: bool) -> list:
    from kfmt.partition.layout import NO_KAFKA_FILE, has_kafka_files, load_partition, parse_topic_partition

    if not storage.exists(path) or not storage.isdir(path):
        raise UsageError(f"{given}: no such directory")
    own = parse_topic_partition(storage.basename(path))
    if own is not None and own[0] == topic:
        parts = [load_partition(storage, path)]
    else:
        children = []
        for info in storage.listdir(path):
            tp = parse_topic_partition(info.name) if info.is_dir else None
            if tp is not None and tp[0] == topic:
                children.append((tp[1], info.path))
        if not children and required:
            raise UsageError(f"{given}: no {topic}-N partition directory here")
        parts = [load_partition(storage, child) for _n, child in sorted(children)]
    if required and not any(has_kafka_files(p) for p in parts):  # named like Kafka's, nothing of Kafka's
        raise UsageError(f"{given}: {NO_KAFKA_FILE}")
    return parts


def add_arguments(p):
    p.add_argument("path", metavar="LOGDIR",
                   help="a log directory holding __consumer_offsets-N partitions, or one such "
                        "partition directory (local path or fsspec URL)")
    add_format_argument(p)
    add_storage_arguments(p)


def run(args) -> int:
    from kfmt.inspect.dump.consumer_offsets import load_group_offsets
    from kfmt.inspect.dump.share_group_offsets import add_share_offsets
    from kfmt.storage.store import open_storage, parse_storage_options

    storage, path = open_storage(args.path, parse_storage_options(args.storage_option))
    state = load_group_offsets(topic_partitions(storage, path, args.path))
    add_share_offsets(state, topic_partitions(storage, path, args.path, SHARE_STATE_TOPIC, required=False))
    for producer_id, count in sorted(state.open_transactions.items()):
        warnings.warn(f"{count} offset commit(s) of producer {producer_id} wait for a transaction "
                      f"that has not ended: not counted", KfmtWarning, stacklevel=1)
    if args.format == "json":
        for commit in state.sorted_offsets():
            print(dumps(commit.to_json()))
        return 0
    print("\t".join(COLUMNS))
    for c in state.sorted_offsets():
        print("\t".join((_field(c.group), _field(c.topic), str(c.partition), str(c.offset),
                         "-" if c.leader_epoch is None else str(c.leader_epoch),
                         str(c.commit_timestamp), _field(c.metadata), c.group_type)))
    return 0


_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _field(text: str) -> str:
    """One tab-separated field: backslash, tab and line ends escaped, other control characters
    as \\u00XX, so that every commit stays on its one line."""
    return "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04X}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                   for c in text)
