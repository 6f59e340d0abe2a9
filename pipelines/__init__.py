"""Spark pipelines."""
