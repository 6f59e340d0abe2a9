"""Helpers the tests import (`from support.corpus import REALKAFKA`): the real-broker corpus and
its truth files, the CLI run in-process, the S3 test server, the fuzzers and the optional tools.
pytest finds this package through `pythonpath = ["tests"]` (pyproject.toml); conftest.py holds
only fixtures and hooks."""
