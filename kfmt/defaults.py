"""The default of every setting a command takes: Kafka's configuration defaults kfmt follows, the
defaults of the Kafka tools it mirrors, and kfmt's own. Plain numbers, in a module that imports
nothing, because the command-line parser shows them in `kfmt --help`: the parser must not import
the code that uses them (pyarrow, numpy), and every module that does imports them from here."""

# Kafka's topic configurations (LogConfig, docs/format.md §6.4, §12.2)
DEFAULT_SEGMENT_BYTES = 1 << 30  # segment.bytes, at least 14 (LegacyRecord.RECORD_OVERHEAD_V0)
DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000  # segment.ms, at least 1
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024  # segment.index.bytes
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes
DEFAULT_DELETE_RETENTION_MS = 86_400_000  # delete.retention.ms

# Kafka's broker configurations
DEFAULT_PRODUCER_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms (1 day)
DEFAULT_OFFSET_MAP_MEMORY = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_OFFSET_MAP_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor

# kafka-dump-log.sh (DumpLogSegments)
DEFAULT_DUMP_MAX_BYTES = 2**31 - 1  # --max-bytes: Integer.MAX_VALUE
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # --max-message-size
# the Kafka versions whose kafka-dump-log output `kfmt dump --kafka-version` reproduces, oldest
# first; the newest is the default (docs/dump.md)
DUMP_KAFKA_VERSIONS = ("3.6", "4.1")
DEFAULT_DUMP_KAFKA_VERSION = DUMP_KAFKA_VERSIONS[-1]

# kfmt's own: export
DEFAULT_TARGET_FILE_BYTES = 128 << 20  # Parquet output per file, as spark.sql.files.maxPartitionBytes
DEFAULT_SPLIT_BYTES = 128 << 20  # input bytes per export task

# kfmt's own: report
DEFAULT_SAMPLE_BYTES = 4 << 20  # the estimate's sample (kfmt.api.estimate)
