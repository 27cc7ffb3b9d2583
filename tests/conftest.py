"""Suite-wide fixtures: real services first, then the scripted model server."""

pytest_plugins = [
    "tests.support.postgres",
    "tests.support.neo4j",
    "tests.support.graph_stores",
    "tests.support.llm_fixtures",
]
