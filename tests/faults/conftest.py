"""Fault tests (issue 6): real Postgres and Neo4j of their own, the scripted model, the real server.

They reuse the e2e suite's sample knowledge base (ingested once per session, copied per test) and never stop
a shared server: a fault that takes a store down uses a private one (tests/support/pg_cluster.py,
tests/support/private_neo4j.py).
"""

from __future__ import annotations

from tests.e2e.conftest import data_dir, orchard_knowledge
from tests.support.fault_report import fault_report, fault_report_session
from tests.support.pg_cluster import pg_cluster

__all__ = ["data_dir", "fault_report", "fault_report_session", "orchard_knowledge", "pg_cluster"]
