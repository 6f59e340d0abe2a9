"""`__transaction_state` record schemas (Kafka's transaction coordinator,
transaction-coordinator/src/main/resources/common/message/): a TransactionLogKey (record type 0,
read at version 0) and a TransactionLogValue (0, or 1 = flexible, KIP-915, with the tagged fields
of transaction version 2, KIP-890)."""
from __future__ import annotations

from kfmt.format.internal_topics.protocol import F, message

TRANSACTION_LOG_KEY = message(
    "TransactionLogKey", "0", None,
    F("transactionalId", "string"),
)

TRANSACTION_LOG_VALUE = message(
    "TransactionLogValue", "0-1", "1+",
    F("producerId", "int64"),
    F("previousProducerId", "int64", None, tagged="1+", tag=0, default=-1),
    F("nextProducerId", "int64", None, tagged="1+", tag=1, default=-1),
    F("producerEpoch", "int16"),
    # the epoch that goes with nextProducerId (a version-2 transaction rolling over onto a new producer
    # id, docs/format.md §7.1); in Kafka's trunk from 4.2 on
    F("nextProducerEpoch", "int16", None, tagged="1+", tag=3, default=-1),
    F("transactionTimeoutMs", "int32"),
    F("transactionStatus", "int8"),
    F("transactionPartitions", "[]PartitionsSchema", nullable="0+", fields=(
        F("topic", "string"),
        F("partitionIds", "[]int32"),
    )),
    F("transactionLastUpdateTimestampMs", "int64"),
    F("transactionStartTimestampMs", "int64"),
    F("clientTransactionVersion", "int16", None, tagged="1+", tag=2),
)

# CoordinatorRecordType -> (key, value)
TRANSACTION_RECORDS = {0: (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)}

# TransactionState's ids and the names its Scala case objects print (Kafka 3.6)
TRANSACTION_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
                      4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}
