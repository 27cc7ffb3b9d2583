"""Constraints and indexes of the Neo4j GraphStore, created idempotently when a store opens.

Community Edition has no composite node keys, so each node label has a globally unique `uid` (a hash
of kb and id, see params.py); KB-wide queries seek by `kbt`, a hash token of the KB. Fulltext indexes
use the whitespace analyzer over terms that Python pre-tokenises with `fulltext_terms` (CJK as jieba
words), exactly what the embedded store indexes; `kbt` is indexed with them so that Lucene scopes
a search to its KB. Vector indexes are cosine, unquantised, of the configured dimension.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Final, LiteralString

from neo4j import AsyncDriver, AsyncManagedTransaction
from neo4j.exceptions import ClientError

from backend.infrastructure.graph_store.neo4j import queries as q

logger = logging.getLogger(__name__)

INDEX_WAIT_S: Final = 120

# (name, statement): a rule is created only when no rule of that name exists yet.
_CONSTRAINTS: Final[tuple[tuple[str, LiteralString], ...]] = (
    (
        "graphrag_knowledge_base_uid",
        "CREATE CONSTRAINT graphrag_knowledge_base_uid IF NOT EXISTS FOR (n:KnowledgeBase) REQUIRE n.uid IS UNIQUE",
    ),
    (
        "graphrag_document_uid",
        "CREATE CONSTRAINT graphrag_document_uid IF NOT EXISTS FOR (n:Document) REQUIRE n.uid IS UNIQUE",
    ),
    ("graphrag_chunk_uid", "CREATE CONSTRAINT graphrag_chunk_uid IF NOT EXISTS FOR (n:Chunk) REQUIRE n.uid IS UNIQUE"),
    (
        "graphrag_entity_uid",
        "CREATE CONSTRAINT graphrag_entity_uid IF NOT EXISTS FOR (n:Entity) REQUIRE n.uid IS UNIQUE",
    ),
    (
        "graphrag_community_uid",
        "CREATE CONSTRAINT graphrag_community_uid IF NOT EXISTS FOR (n:Community) REQUIRE n.uid IS UNIQUE",
    ),
    (
        "graphrag_community_set_uid",
        "CREATE CONSTRAINT graphrag_community_set_uid IF NOT EXISTS FOR (n:CommunitySet) REQUIRE n.uid IS UNIQUE",
    ),
    (
        "graphrag_routing_term_uid",
        "CREATE CONSTRAINT graphrag_routing_term_uid IF NOT EXISTS FOR (n:RoutingTerm) REQUIRE n.uid IS UNIQUE",
    ),
)

_RANGE_INDEXES: Final[tuple[tuple[str, LiteralString], ...]] = (
    ("graphrag_document_kb", "CREATE INDEX graphrag_document_kb IF NOT EXISTS FOR (n:Document) ON (n.kbt)"),
    ("graphrag_document_source", "CREATE INDEX graphrag_document_source IF NOT EXISTS FOR (n:Document) ON (n.skey)"),
    ("graphrag_chunk_kb", "CREATE INDEX graphrag_chunk_kb IF NOT EXISTS FOR (n:Chunk) ON (n.kbt)"),
    ("graphrag_entity_kb", "CREATE INDEX graphrag_entity_kb IF NOT EXISTS FOR (n:Entity) ON (n.kbt)"),
    ("graphrag_community_kb", "CREATE INDEX graphrag_community_kb IF NOT EXISTS FOR (n:Community) ON (n.kbt)"),
    (
        "graphrag_relation_mention_pair",
        "CREATE INDEX graphrag_relation_mention_pair IF NOT EXISTS FOR (n:RelationMention) ON (n.pair)",
    ),
    (
        "graphrag_relation_mention_doc",
        "CREATE INDEX graphrag_relation_mention_doc IF NOT EXISTS FOR (n:RelationMention) ON (n.doc)",
    ),
)

_FULLTEXT_INDEXES: Final[tuple[tuple[str, LiteralString], ...]] = (
    (
        q.CHUNK_FULLTEXT_INDEX,
        f"""CREATE FULLTEXT INDEX {q.CHUNK_FULLTEXT_INDEX} IF NOT EXISTS FOR (n:Chunk) ON EACH [n.terms, n.kbt]
    OPTIONS {{indexConfig: {{`fulltext.analyzer`: 'whitespace', `fulltext.eventually_consistent`: false}}}}""",
    ),
    (
        q.ENTITY_FULLTEXT_INDEX,
        f"""CREATE FULLTEXT INDEX {q.ENTITY_FULLTEXT_INDEX} IF NOT EXISTS FOR (n:Entity) ON EACH [n.terms, n.kbt]
    OPTIONS {{indexConfig: {{`fulltext.analyzer`: 'whitespace', `fulltext.eventually_consistent`: false}}}}""",
    ),
)

# A uniqueness constraint's backing index carries the constraint's name, so indexes list every rule.
_EXISTING_RULES: Final = "SHOW INDEXES YIELD name RETURN collect(name) AS names"

# Index names and labels are the constants of queries.py; the dimension is an int checked by the caller.
_VECTOR_INDEXES: Final[Mapping[str, str]] = {
    q.CHUNK_VECTOR_INDEX: "Chunk",
    q.ENTITY_VECTOR_INDEX: "Entity",
    q.COMMUNITY_VECTOR_INDEX: "Community",
}

_VECTOR_INDEX_DIMENSIONS: Final = """
SHOW VECTOR INDEXES YIELD name, options WHERE name IN $names
RETURN name, options.indexConfig['vector.dimensions'] AS dimension"""

# Another process may create the same rule between IF NOT EXISTS and the create: that is fine.
_ALREADY_THERE: Final = frozenset(
    {
        "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
        "Neo.ClientError.Schema.IndexAlreadyExists",
        "Neo.ClientError.Schema.ConstraintAlreadyExists",
    }
)


def vector_index_statement(index: str, label: str, dimension: int) -> LiteralString:
    """The CREATE statement of one vector index; `index` and `label` come from `_VECTOR_INDEXES` only."""
    if index not in _VECTOR_INDEXES or _VECTOR_INDEXES[index] != label or dimension < 1:
        raise ValueError(f"unknown vector index {index!r} on {label!r} or bad dimension {dimension}")
    # The names are constants and the dimension an int, so no caller text reaches the Cypher.
    return f"""CREATE VECTOR INDEX {index} IF NOT EXISTS FOR (n:{label}) ON n.embedding
    OPTIONS {{indexConfig: {{`vector.dimensions`: {int(dimension)}, `vector.similarity_function`: 'cosine',
        `vector.quantization.enabled`: false}}}}"""


async def ensure_schema(driver: AsyncDriver, database: str | None, dimension: int) -> dict[str, int]:
    """Create what is missing, wait until every index is online, return each vector index's dimension.

    An existing vector index of another dimension is left alone (dropping it is the operator's call):
    searches then scan the KB exactly instead, and a warning says so.
    """
    rules = [
        *_CONSTRAINTS,
        *_RANGE_INDEXES,
        *_FULLTEXT_INDEXES,
        *((index, vector_index_statement(index, label, dimension)) for index, label in _VECTOR_INDEXES.items()),
    ]
    existing = await driver.execute_query(_EXISTING_RULES, database_=database)
    present = set(existing.records[0]["names"])
    for name, statement in rules:
        if name not in present:
            await _create(driver, database, statement)
    await await_indexes(driver, database)
    found = await driver.execute_query(_VECTOR_INDEX_DIMENSIONS, {"names": list(_VECTOR_INDEXES)}, database_=database)
    dimensions = {str(r["name"]): int(r["dimension"]) for r in found.records if r["dimension"] is not None}
    for index, actual in dimensions.items():
        if actual != dimension:
            logger.warning(
                "Neo4j vector index %s has dimension %d, not the configured %d: vector searches scan the KB "
                "exactly; drop the index (DROP INDEX %s) to have it rebuilt with the new dimension",
                index,
                actual,
                dimension,
                index,
            )
    return dimensions


async def drop_vector_indexes(driver: AsyncDriver, database: str | None, names: Iterable[str]) -> None:
    """Drop the named vector indexes (a bulk load suspends them: `create_vector_indexes` builds them again).

    Neo4j keeps a vector index up to date write by write: every transaction adds its vectors to a small HNSW
    graph of its own, and background merges rebuild those graphs into larger ones. A large load made that way
    costs the JVM more CPU than populating the indexes once at the end, and leaves searches slower until the
    index is rebuilt anyway.
    """

    async def drop(tx: AsyncManagedTransaction) -> None:
        for index in names:
            if index not in _VECTOR_INDEXES:
                raise ValueError(f"unknown vector index {index!r}")
            await (await tx.run("DROP INDEX $name IF EXISTS", {"name": index})).consume()

    async with driver.session(database=database) as session:
        await session.execute_write(drop)


async def create_vector_indexes(driver: AsyncDriver, database: str | None, dimensions: Mapping[str, int]) -> None:
    """Create the given vector indexes (name → dimension) that do not exist, in one schema transaction. Neo4j
    populates them in the background from the vectors stored: a query of an index still populating waits for
    it (`await_indexes` waits for all of them)."""

    async def create(tx: AsyncManagedTransaction) -> None:
        for index, dimension in dimensions.items():
            await (await tx.run(vector_index_statement(index, _VECTOR_INDEXES[index], dimension))).consume()

    async with driver.session(database=database) as session:
        await session.execute_write(create)


async def await_indexes(driver: AsyncDriver, database: str | None) -> None:
    """Wait until every index is online (at most INDEX_WAIT_S)."""
    await driver.execute_query("CALL db.awaitIndexes($seconds)", {"seconds": INDEX_WAIT_S}, database_=database)


async def _create(driver: AsyncDriver, database: str | None, statement: LiteralString) -> None:
    try:
        await driver.execute_query(statement, database_=database)
    except ClientError as exc:
        if exc.code not in _ALREADY_THERE:
            raise
