"""`--transaction-log-decoder --kafka-version 3.6`: `__transaction_state` records as Kafka 3.6's
kafka-dump-log prints them (TransactionLogMessageParser; 4.x's JSON is coordinator.py's):

    key: transaction_metadata::transactionalId=ID
    payload: producerId:N,producerEpoch:E,state=S,partitions=[t-0,t-1],txnLastUpdateTimestamp=T,txnTimeoutMs=M

(`producerId:` and `producerEpoch:` with a colon, the rest with `=`, as Kafka writes them). The
partitions are those of the TransactionMetadata the broker would load: none for an Empty
transaction, else in the iteration order of its Scala HashSet. A tombstone prints `<DELETE>`.
"""
from __future__ import annotations

from kfmt.errors import DataError
from kfmt.format.internal_topics.protocol import read_message
from kfmt.format.internal_topics.transactions import (
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
    TRANSACTION_STATES,
)
from kfmt.inspect.dump.decoders.converter import message_json
from kfmt.inspect.dump.decoders.offsets import split_version
from kfmt.inspect.dump.decoders.result import Decoded
from kfmt.inspect.dump.decoders.scalaorder import topic_partition_set_order


def read_value(value: bytes) -> tuple[int, dict]:
    version, body = split_version(value, "transaction log value")
    if not 0 <= version <= 1:
        raise DataError(f"Unknown version {version} from the transaction log message value")
    return version, read_message(TRANSACTION_LOG_VALUE, body, version)


def state_name(status: int) -> str:
    name = TRANSACTION_STATES.get(status)
    if name is None:
        raise DataError(f"Unknown transaction state id {status} from the transaction status message")
    return name


def loaded_partitions(v: dict) -> list[tuple[str, int]]:
    if state_name(v["transactionStatus"]) == "Empty" or v["transactionPartitions"] is None:
        return []
    return topic_partition_set_order([[(t["topic"], p) for p in t["partitionIds"]]
                                      for t in v["transactionPartitions"]])


def parse(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    if key is None:
        return Decoded(None, None)
    try:
        key_version, body = split_version(key, "transaction log key")
        if key_version != 0:
            raise DataError(f"Unknown version {key_version} from the transaction log message key")
        k = read_message(TRANSACTION_LOG_KEY, body, key_version)
        key_text = f"transaction_metadata::transactionalId={k['transactionalId']}"
        key_content = {"version": key_version, "data": k}
        if value is None:
            return Decoded(key_text, "<DELETE>", {"key": key_content, "value": None})
        version, v = read_value(value)
        state = state_name(v["transactionStatus"])
        partitions = ",".join(f"{t}-{p}" for t, p in loaded_partitions(v))
        payload = (f"producerId:{v['producerId']},producerEpoch:{v['producerEpoch']},state={state},"
                   f"partitions=[{partitions}],txnLastUpdateTimestamp="
                   f"{v['transactionLastUpdateTimestampMs']},txnTimeoutMs={v['transactionTimeoutMs']}")
        data = message_json(TRANSACTION_LOG_VALUE, v, version)
        return Decoded(key_text, payload, {"key": key_content,
                                           "value": {"version": version, "state": state, "data": data}})
    except DataError as err:
        raise DataError(f"transaction log decoder: {err}") from None
