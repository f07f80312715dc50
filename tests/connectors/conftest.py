"""Fixtures of the connector tests.

``store`` (from tests/conftest.py) runs a test on SQLite and PostgreSQL; it is
used where appending is what is tested. Lifecycle tests whose subject is the
order of calls into a source, not the store, use ``sqlite_store`` (also from
tests/conftest.py): a real store too, on one backend, to keep the suite fast.
"""
