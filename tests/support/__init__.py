"""Helpers the tests import (`from support.corpus import REALKAFKA`): the real-broker corpus and
its truth files, the CLI run in-process, the S3 test server, the fuzzers and the optional tools, and
every helper, strategy or fixture more than one test module uses (test modules never import one
another: tests/test_architecture.py checks). Fixtures shared this way are imported by name into the
modules that use them (`from support.spark_session import spark  # noqa: F401`), which keeps their
module scope. pytest finds this package through `pythonpath = ["tests"]` (pyproject.toml) and
rewrites its asserts (conftest.py); conftest.py holds only fixtures and hooks."""
