"""The security suite runs the real server over the sample knowledge base of the end-to-end suite."""

from tests.e2e.conftest import data_dir, orchard_knowledge

__all__ = ["data_dir", "orchard_knowledge"]
