"""Every Cypher statement of the Neo4j GraphStore, as named constants.

Labels, relationship types, property keys and index names are fixed here; every value a caller supplies
(KB names, ids, text, vectors, the Lucene query string) is a `$parameter`. Nodes are keyed by `uid`, a
hash of the pair (kb, id) made in Python, so ids of one KB can never address another KB's nodes, and
listed by `kbt`, a hash token of the KB (then checked against `kb` itself): indexed values stay small
whatever the caller's strings.

Graph model (SPEC §8):
  (:KnowledgeBase {uid, kb, ...registry fields})
  (:Document {uid, kb, kbt, id, title, metadata, source, skey, chunk_count, created_at})   skey: hash of source
  (:Chunk {uid, kb, kbt, id, doc_id, ordinal, text, start, end, terms, embedding?, has_embedding})
      -[:PART_OF]->(:Document), -[:NEXT]->(:Chunk), -[:MENTIONS {name, type, description}]->(:Entity)
  (:Entity {uid, kb, kbt, id, name, type, description, mention_count, terms, embedding?, has_embedding?})
      -[:RELATED {kb, description, weight, chunk_ids}]->(:Entity)   (source id < target id)
      -[:IN_COMMUNITY]->(:Community {uid, kb, kbt, id, level, title, summary, rank, embedding?, has_embedding?})
  (:Community)-[:PARENT]->(:Community)
  (:RelationMention {kb, doc, pair, source_id, target_id, chunk_id, description, weight})  internal: one
      relation as one chunk states it, kept so that deletes can recompute the merged RELATED values;
      `doc` is its document's uid, `pair` a hash of (kb, source id, target id).
  (:CommunitySet {uid, kb, refresh})  internal: one per KB, the lock and ticket of community refreshes.
  (:RoutingTerm {uid, kb, kbt, term, chunks})  the KB's routing profile (`graph_store/profile.py`): the chunks
      holding `term`; uid is `kbt:term`. A Document keeps what it added as `profile_terms`, `profile_chunks`.
The fulltext indexes cover `kbt` too, so that Lucene itself scopes a search to its KB. `embedding` is
absent for a zero vector (cosine is undefined there); `has_embedding` says a vector was given at all.
"""

from __future__ import annotations

from typing import Final

# -- index names (schema.py creates them) --------------------------------------------------------------------

CHUNK_FULLTEXT_INDEX: Final = "graphrag_chunk_terms"
ENTITY_FULLTEXT_INDEX: Final = "graphrag_entity_terms"
CHUNK_VECTOR_INDEX: Final = "graphrag_chunk_embedding"
ENTITY_VECTOR_INDEX: Final = "graphrag_entity_embedding"
COMMUNITY_VECTOR_INDEX: Final = "graphrag_community_embedding"

# -- projections shared by searches and lookups (`n` is the node, `score` its score) --------------------------
# The agents' reads return their rows as ONE record, `rows`, a list of maps (`_rows`): the driver reads every
# record with two socket reads, each under a timer and a task (neo4j 6.4, once the server sends its receive
# timeout hint), which cost a fused question more CPU than its ~800 rows' data. A projection is a WITH of
# named columns, so that a query can order and limit them before they are collected.


def _rows(*columns: str) -> str:
    """The columns of the preceding WITH, in its order, collected into one record's `rows`."""
    return "\nRETURN collect({" + ", ".join(f"{column}: {column}" for column in columns) + "}) AS rows"


_CHUNK_COLUMNS = """MATCH (n)-[:PART_OF]->(d:Document)
WITH n.id AS id, d.id AS doc_id, d.title AS title, n.text AS text, n.ordinal AS ordinal, score"""
_CHUNK_ROWS = _rows("id", "doc_id", "title", "text", "ordinal", "score")
_ENTITY_COLUMNS = """WITH n.id AS id, n.name AS name, n.type AS type, n.description AS description,
    n.mention_count AS mention_count, score"""
_ENTITY_ROWS = _rows("id", "name", "type", "description", "mention_count", "score")
_COMMUNITY_COLUMNS = """WITH n.id AS id, n.level AS level, n.title AS title, n.summary AS summary, n.rank AS rank,
    head([(n)-[:PARENT]->(p:Community) | p.id]) AS parent_id,
    COLLECT { MATCH (e:Entity)-[:IN_COMMUNITY]->(n) RETURN e.id } AS members, score"""
_COMMUNITY_ROWS = _rows("id", "level", "title", "summary", "rank", "parent_id", "members", "score")
_DOCUMENT_FIELDS = """RETURN d.id AS id, d.title AS title, d.metadata AS metadata, d.source AS source,
    d.chunk_count AS chunk_count, d.created_at AS created_at"""

# -- knowledge bases ---------------------------------------------------------------------------------------------

# The uniqueness constraint on `uid` (schema.py) fails a CREATE of a prefix already stored, also when two run at
# once (the second waits for the first to commit): the store reports that as "not created".
CREATE_KNOWLEDGE_BASE: Final = """
CREATE (k:KnowledgeBase {uid: $kb.kb_prefix})
SET k.kb = $kb.kb_prefix, k.description = $kb.description, k.keywords = $kb.keywords, k.language = $kb.language,
    k.default_agent = $kb.default_agent, k.is_default = $kb.is_default, k.sources = $kb.sources,
    k.handler = $kb.handler"""

LIST_KNOWLEDGE_BASES: Final = """
MATCH (k:KnowledgeBase)
RETURN k.kb AS kb_prefix, k.description AS description, k.keywords AS keywords, k.language AS language,
    k.default_agent AS default_agent, k.is_default AS is_default, k.sources AS sources, k.handler AS handler
ORDER BY kb_prefix"""

# -- documents ---------------------------------------------------------------------------------------------------

GET_DOCUMENT: Final = "MATCH (d:Document {uid: $uid})\n" + _DOCUMENT_FIELDS

DOCUMENT_CHUNKS: Final = """
MATCH (:Document {uid: $uid})<-[:PART_OF]-(c:Chunk)
RETURN c.id AS id, c.doc_id AS doc_id, c.ordinal AS ordinal, c.text AS text, c.start AS start_char,
    c.`end` AS end_char
ORDER BY ordinal"""

LIST_DOCUMENTS: Final = (
    "MATCH (d:Document {kbt: $kbt}) WHERE d.kb = $kb AND ($source IS NULL OR (d.skey = $skey AND d.source = $source))\n"
    + _DOCUMENT_FIELDS
    + "\nORDER BY title, id"
)

EXISTING_DOCUMENT_IDS: Final = "UNWIND $uids AS uid MATCH (d:Document {uid: uid}) WITH d.id AS id" + _rows("id")
EXISTING_ENTITY_IDS: Final = "UNWIND $uids AS uid MATCH (e:Entity {uid: uid}) WITH e.id AS id" + _rows("id")

COUNTS: Final = """
RETURN COUNT { MATCH (n:Document {kbt: $kbt}) WHERE n.kb = $kb } AS documents,
    COUNT { MATCH (n:Chunk {kbt: $kbt}) WHERE n.kb = $kb } AS chunks,
    COUNT { MATCH (n:Entity {kbt: $kbt}) WHERE n.kb = $kb } AS entities,
    COUNT { MATCH (n:Entity {kbt: $kbt})-[:RELATED]->(:Entity) WHERE n.kb = $kb } AS relations,
    COUNT { MATCH (n:Community {kbt: $kbt}) WHERE n.kb = $kb } AS communities"""

# Names by mention count and titles by length (chunks): what the model router's catalog shows of a KB.
OVERVIEW: Final = """
RETURN COUNT { MATCH (d:Document {kbt: $kbt}) WHERE d.kb = $kb } AS documents,
    COLLECT {
        MATCH (e:Entity {kbt: $kbt}) WHERE e.kb = $kb
        RETURN e.name ORDER BY e.mention_count DESC, e.name, e.id LIMIT $entities
    } AS entities,
    COLLECT {
        MATCH (d:Document {kbt: $kbt}) WHERE d.kb = $kb AND d.title <> ''
        RETURN d.title ORDER BY d.chunk_count DESC, d.title, d.id LIMIT $titles
    } AS titles"""

ENTITY_GRAPH: Final = """
RETURN COLLECT { MATCH (e:Entity {kbt: $kbt}) WHERE e.kb = $kb RETURN e.id } AS entity_ids,
    COLLECT {
        MATCH (a:Entity {kbt: $kbt})-[r:RELATED]->(b:Entity) WHERE a.kb = $kb RETURN [a.id, b.id, r.weight]
    } AS edges"""

# -- writing documents (a group of documents in two statements, then one merge: see writes.py) ---------------

# A write and a delete both read what a document held and remove its content; `uid` is how the statement names
# the document's uid (`$uid`, or `p.uid` for a row of a group), and `d` is the document.


def _held(uid: str) -> str:
    """The merge's input from document `d`: the entities its chunks mention and the relation pairs it states."""
    return f"""COLLECT {{ MATCH (d)<-[:PART_OF]-(:Chunk)-[:MENTIONS]->(e:Entity) RETURN DISTINCT e.id }} AS entity_ids,
    COLLECT {{ MATCH (m:RelationMention {{doc: {uid}}}) RETURN DISTINCT [m.source_id, m.target_id] }} AS pairs"""


def _remove_content(uid: str, imports: str) -> str:
    """Delete the document's relation mentions and its chunks with their links (`imports`: what `uid` needs)."""
    return f"""
CALL ({imports}) {{ MATCH (m:RelationMention {{doc: {uid}}}) DELETE m }}
CALL ({imports}) {{ MATCH (c:Chunk)-[:PART_OF]->(:Document {{uid: {uid}}}) DETACH DELETE c }}
"""


# A document's routing profile: taken back from its KB's terms (`d`'s stored lists; a term left at zero goes),
# and added ($kbt and the row `p`'s lists, sorted by term: writers lock a KB's terms in one order).
_TAKE_PROFILE = """
CALL (d) {
    UNWIND range(0, size(coalesce(d.profile_terms, [])) - 1) AS i
    MATCH (t:RoutingTerm {uid: $kbt + ':' + d.profile_terms[i]})
    SET t.chunks = t.chunks - d.profile_chunks[i]
    WITH t WHERE t.chunks <= 0
    DELETE t
}
"""
_ADD_PROFILE = """
CALL (d, p) {
    UNWIND range(0, size(p.profile_terms) - 1) AS i
    MERGE (t:RoutingTerm {uid: $kbt + ':' + p.profile_terms[i]})
    ON CREATE SET t.kb = $kb, t.kbt = $kbt, t.term = p.profile_terms[i], t.chunks = 0
    SET t.chunks = t.chunks + p.profile_chunks[i]
}
SET d.profile_terms = p.profile_terms, d.profile_chunks = p.profile_chunks
"""

# What a delete must know first: is the document there, and what it held. Read under the document's write lock
# (SET/REMOVE of a marker), so that two writers of one document run one after the other.
LOCK_DOCUMENT_FOR_DELETE: Final = """
OPTIONAL MATCH (d:Document {uid: $uid})
FOREACH (locked IN CASE WHEN d IS NULL THEN [] ELSE [d] END | SET locked._lock = true REMOVE locked._lock)
WITH d
RETURN d IS NOT NULL AS exists, """ + _held("$uid")

# The mentions that remain for the entities and relations a write touched ($entity_uids, $pairs): the
# input of the merge rules, read in the transaction that changed them, under its locks (after a group of
# documents, once: a hub entity's mentions are read once per group, not per document).
MERGE_INPUTS: Final = """
RETURN COLLECT {
        UNWIND $entity_uids AS uid
        MATCH (e:Entity {uid: uid})
        RETURN {uid: e.uid, id: e.id, name: e.name, type: e.type, description: e.description,
            mention_count: e.mention_count,
            mentions: COLLECT { MATCH (c:Chunk)-[m:MENTIONS]->(e) RETURN [m.name, m.type, m.description, c.id] }}
    } AS entities,
    COLLECT {
        UNWIND $pairs AS pair
        MATCH (m:RelationMention {pair: pair})
        RETURN [m.pair, m.source_id, m.target_id, m.description, m.weight, m.chunk_id]
    } AS relation_mentions"""

# The KB's embedding dimensions before a group of documents is written: the chunk one without the group's own
# documents (their chunks are about to be replaced).
KB_DIMENSIONS: Final = """
RETURN head(COLLECT {
        MATCH (n:Chunk {kbt: $kbt}) WHERE n.kb = $kb AND NOT n.doc_id IN $doc_ids AND n.embedding IS NOT NULL
        RETURN size(n.embedding) LIMIT 1
    }) AS chunk_dimension,
    head(COLLECT {
        MATCH (n:Entity {kbt: $kbt}) WHERE n.kb = $kb AND n.embedding IS NOT NULL RETURN size(n.embedding) LIMIT 1
    }) AS entity_dimension"""

# Each document of a group, in order, in one statement (a round trip and a query execution per group, not two
# per document): its write lock, what it held (the merge's input: the entities and relation pairs it
# mentioned), then its old content replaced by the new. A document written twice in a group sees its first
# write, as it would in two statements.
WRITE_DOCUMENTS: Final = (
    """
UNWIND $documents AS p
CALL (p) {
    MERGE (d:Document {uid: p.uid})
    SET d._lock = true REMOVE d._lock
    WITH d, p, d.created_at AS created_at, """
    + _held("p.uid")
    + _remove_content("p.uid", "p")
    + _TAKE_PROFILE
    + _ADD_PROFILE
    + """
    SET d.kb = $kb, d.kbt = $kbt, d.id = p.doc.id, d.title = p.doc.title, d.metadata = p.doc.metadata,
        d.source = p.doc.source, d.skey = p.doc.skey, d.chunk_count = p.doc.chunk_count,
        d.created_at = coalesce(p.doc.created_at, created_at, $now)
    WITH d, p, entity_ids, pairs
    CALL (d, p) {
        UNWIND p.chunks AS row
        CREATE (c:Chunk)
        SET c = row, c.kb = $kb, c.kbt = $kbt
        CREATE (c)-[:PART_OF]->(d)
    }
    CALL (p) {
        UNWIND p.next AS pair
        MATCH (a:Chunk {uid: pair[0]}), (b:Chunk {uid: pair[1]})
        CREATE (a)-[:NEXT]->(b)
    }
    CALL (p) {
        UNWIND p.entities AS row
        MERGE (e:Entity {uid: row.uid})
        ON CREATE SET e.kb = $kb, e.kbt = $kbt, e.id = row.id, e.name = '', e.type = '', e.description = '',
            e.mention_count = 0, e.terms = ''
        WITH e, row WHERE row.has_embedding AND e.has_embedding IS NULL
        SET e.embedding = row.embedding, e.has_embedding = true
    }
    CALL (p) {
        UNWIND p.mentions AS row
        MATCH (c:Chunk {uid: row.chunk}), (e:Entity {uid: row.entity})
        CREATE (c)-[:MENTIONS {name: row.name, type: row.type, description: row.description}]->(e)
    }
    CALL (p) {
        UNWIND p.relation_mentions AS row
        CREATE (m:RelationMention)
        SET m = row, m.kb = $kb
    }
    RETURN {entity_ids: entity_ids, pairs: pairs} AS held
}
RETURN collect(held) AS held"""
)

# Write locks on the entities a delete touches, taken (in id order) before their remaining mentions are read:
# two deletes that share an entity or relation would otherwise each merge what they saw before the other's
# commit, and the later one would write back a mention the earlier one removed.
LOCK_ENTITIES: Final = """
UNWIND $entity_uids AS uid
MATCH (e:Entity {uid: uid})
SET e._lock = true REMOVE e._lock"""

DELETE_DOCUMENT: Final = (
    _remove_content("$uid", "")
    + """
CALL () {
    MATCH (d:Document {uid: $uid})"""
    + _TAKE_PROFILE
    + """
    DETACH DELETE d
}"""
    + MERGE_INPUTS
)

# The merged values computed in Python; entities and relations left without a mention go. DETACH: an
# entity's memberships and RELATED edges go with it.
APPLY_MERGES: Final = """
CALL () { UNWIND $gone_entities AS uid MATCH (e:Entity {uid: uid}) DETACH DELETE e }
CALL () {
    UNWIND $entities AS row
    MATCH (e:Entity {uid: row.uid})
    SET e.name = row.name, e.type = row.type, e.description = row.description, e.mention_count = row.mention_count,
        e.terms = row.terms
}
CALL () {
    UNWIND $gone_relations AS row
    MATCH (:Entity {uid: row.source})-[r:RELATED]->(:Entity {uid: row.target})
    DELETE r
}
CALL () {
    UNWIND $relations AS row
    MATCH (a:Entity {uid: row.source}), (b:Entity {uid: row.target})
    MERGE (a)-[r:RELATED]->(b)
    SET r.kb = $kb, r.description = row.description, r.weight = row.weight, r.chunk_ids = row.chunk_ids
}"""

# -- communities (community_refresh.py) ---------------------------------------------------------------------------
# A refresh writes only what differs from the stored set (new and dropped communities, changed properties,
# memberships and parent links that changed). A small difference is one transaction; a large one (the top levels
# of a big KB re-clustered) is applied in bounded batches, each its own transaction, because one transaction
# holding it all exceeded Neo4j's transaction memory on 6,000 documents.

# One node per KB. Its `refresh` counter is a ticket: each batch locks the node and goes on only while its
# refresh is the newest, so two refreshes of one KB never interleave their batches (the newer one wins).
BEGIN_COMMUNITY_REFRESH: Final = """
MERGE (l:CommunitySet {uid: $kbt})
SET l.kb = $kb, l.refresh = coalesce(l.refresh, 0) + 1
RETURN l.refresh AS ticket"""

CONTINUE_COMMUNITY_REFRESH: Final = """
MATCH (l:CommunitySet {uid: $kbt})
SET l._lock = true
REMOVE l._lock
RETURN l.refresh = $ticket AS current"""

# What a refresh will change, to choose one transaction or batches, and the vector dimension kept communities
# without a new vector keep (the new vectors must match it).
SURVEY_COMMUNITIES: Final = """
CALL () {
    MATCH (c:Community {kbt: $kbt}) WHERE c.kb = $kb AND NOT c.uid IN $keep
    RETURN count(c) AS stale
}
CALL () {
    UNWIND $unvectored AS uid
    MATCH (c:Community {uid: uid}) WHERE c.embedding IS NOT NULL
    RETURN collect(DISTINCT size(c.embedding)) AS dimensions
}
RETURN stale, dimensions"""

DROP_OTHER_COMMUNITIES: Final = """
MATCH (c:Community {kbt: $kbt}) WHERE c.kb = $kb AND NOT c.uid IN $keep
WITH c LIMIT $limit
DETACH DELETE c
RETURN count(*) AS dropped"""

# A community whose id is kept keeps its embedding unless a new vector is given; unchanged properties are not
# written again.
WRITE_COMMUNITIES: Final = """
UNWIND $rows AS row
MERGE (c:Community {uid: row.uid})
WITH c, row
CALL (c, row) {
    WITH c, row WHERE c.id IS NULL OR c.level <> row.level OR c.title <> row.title OR c.summary <> row.summary
        OR c.rank <> row.rank
    SET c.kb = $kb, c.kbt = $kbt, c.id = row.id, c.level = row.level, c.title = row.title, c.summary = row.summary,
        c.rank = row.rank
}
WITH c, row WHERE row.has_embedding
SET c.embedding = row.embedding, c.has_embedding = true"""

# Memberships: the stale ones removed, the missing ones added (members that are not entities are skipped).
UNLINK_STALE_MEMBERS: Final = """
UNWIND $rows AS row
MATCH (e:Entity)-[r:IN_COMMUNITY]->(:Community {uid: row.community})
WHERE NOT e.uid IN row.members
DELETE r"""

LINK_MEMBERS: Final = """
UNWIND $pairs AS pair
MATCH (c:Community {uid: pair[0]}), (e:Entity {uid: pair[1]})
MERGE (e)-[:IN_COMMUNITY]->(c)"""

UNLINK_STALE_PARENTS: Final = """
MATCH (c:Community {kbt: $kbt})-[r:PARENT]->(p:Community) WHERE c.kb = $kb AND coalesce($parent_of[c.uid], '') <> p.uid
DELETE r"""

LINK_PARENTS: Final = """
UNWIND $rows AS row
MATCH (c:Community {uid: row.child}), (p:Community {uid: row.parent})
MERGE (c)-[:PARENT]->(p)"""

# -- lookups by id -------------------------------------------------------------------------------------------------

GET_CHUNKS: Final = (
    "UNWIND $uids AS uid MATCH (n:Chunk {uid: uid}) WITH n, 0.0 AS score\n" + _CHUNK_COLUMNS + _CHUNK_ROWS
)
CHUNK_EMBEDDINGS: Final = """
UNWIND $uids AS uid
MATCH (n:Chunk {uid: uid}) WHERE n.embedding IS NOT NULL
RETURN n.id AS id, n.embedding AS embedding"""
GET_ENTITIES: Final = (
    "UNWIND $uids AS uid MATCH (n:Entity {uid: uid}) WITH n, 0.0 AS score\n" + _ENTITY_COLUMNS + _ENTITY_ROWS
)

RELATIONS_OF: Final = """
UNWIND $uids AS uid
MATCH (:Entity {uid: uid})-[r:RELATED]-(:Entity)
WITH DISTINCT r
MATCH (a:Entity)-[r]->(b:Entity)
WITH a.id AS source_id, b.id AS target_id, r.description AS description, r.weight AS weight,
    r.chunk_ids AS chunk_ids
ORDER BY weight DESC, source_id, target_id
LIMIT $limit""" + _rows("source_id", "target_id", "description", "weight", "chunk_ids")

CHUNKS_MENTIONING: Final = (
    """
UNWIND $uids AS uid
MATCH (e:Entity {uid: uid})<-[:MENTIONS]-(c:Chunk)
WITH c AS n, count(DISTINCT e) AS mentioned
WITH n, toFloat(mentioned) AS score
"""
    + _CHUNK_COLUMNS
    + "\nORDER BY score DESC, title, ordinal, id LIMIT $limit"
    + _CHUNK_ROWS
)

ENTITIES_IN_CHUNKS: Final = """
UNWIND $uids AS uid
MATCH (c:Chunk {uid: uid})-[:MENTIONS]->(e:Entity)
WITH c.id AS chunk_id, collect(DISTINCT e.id) AS entity_ids""" + _rows("chunk_id", "entity_ids")

CHUNKS_OF_ENTITIES: Final = """
UNWIND $uids AS uid
MATCH (e:Entity {uid: uid})
WITH e.id AS entity_id, COLLECT {
    MATCH (e)<-[:MENTIONS]-(c:Chunk)-[:PART_OF]->(d:Document)
    WITH DISTINCT c, d, toLower(d.title) AS title, toLower(e.name) AS name
    // The entity's own document first: titled with its name, perhaps after an article or before a "(film)".
    ORDER BY title IN [name, 'the ' + name, 'a ' + name, 'an ' + name] OR title STARTS WITH name + ' (' DESC,
        d.title, c.ordinal, c.id
    LIMIT $per_entity
    RETURN c.id
} AS chunk_ids""" + _rows("entity_id", "chunk_ids")

COMMUNITIES_OF: Final = (
    """
UNWIND $uids AS uid
MATCH (:Entity {uid: uid})-[:IN_COMMUNITY]->(n:Community)
WITH DISTINCT n
WITH n, 0.0 AS score
"""
    + _COMMUNITY_COLUMNS
    + _COMMUNITY_ROWS
)

LIST_COMMUNITIES: Final = (
    """
MATCH (n:Community {kbt: $kbt}) WHERE n.kb = $kb AND ($level IS NULL OR n.level = $level)
WITH n, 0.0 AS score
"""
    + _COMMUNITY_COLUMNS
    + _COMMUNITY_ROWS
)

# -- fulltext search ($query is a Lucene query built from escaped terms, see store.py) --------------------------


def _fulltext(index: str, fields: str) -> str:
    """`fields`: a projection and its `_rows`."""
    return (
        f"""
CALL db.index.fulltext.queryNodes('{index}', $query, {{limit: $fetch}}) YIELD node, score
WITH node AS n, score WHERE n.kb = $kb
"""
        + fields
    )


SEARCH_CHUNKS_FULLTEXT: Final = _fulltext(CHUNK_FULLTEXT_INDEX, _CHUNK_COLUMNS + _CHUNK_ROWS)
SEARCH_ENTITIES_FULLTEXT: Final = _fulltext(ENTITY_FULLTEXT_INDEX, _ENTITY_COLUMNS + _ENTITY_ROWS)

# -- vector search ---------------------------------------------------------------------------------------------
# Scores are cosines: vector.similarity.cosine() and a cosine index's score are (1 + cos) / 2 (the index's
# own score spares reading each candidate's vector again). A node whose vector was zero has no `embedding`
# and scores 0, as in the embedded store. `$level` is null except for communities.


def _vector_probe(label: str) -> str:
    """How many nodes of the KB have a vector (counted up to $cap) and the dimension of one of them."""
    return f"""
RETURN size(COLLECT {{
        MATCH (n:{label} {{kbt: $kbt}}) WHERE n.kb = $kb AND n.has_embedding AND ($level IS NULL OR n.level = $level)
        RETURN 1 AS one LIMIT $cap
    }}) AS size,
    head(COLLECT {{
        MATCH (n:{label} {{kbt: $kbt}}) WHERE n.kb = $kb AND n.embedding IS NOT NULL
        RETURN size(n.embedding) AS dimension LIMIT 1
    }}) AS dimension"""


def _vector_exact(label: str, fields: str) -> str:
    """`fields`: a projection and its `_rows`."""
    return (
        f"""
MATCH (n:{label} {{kbt: $kbt}}) WHERE n.kb = $kb AND n.has_embedding AND ($level IS NULL OR n.level = $level)
WITH n, CASE WHEN n.embedding IS NULL THEN 0.0
    ELSE 2.0 * vector.similarity.cosine(n.embedding, $vector) - 1.0 END AS score
ORDER BY score DESC, n.id
LIMIT $limit
"""
        + fields
    )


def _vector_indexed(index: str, fields: str) -> str:
    return (
        f"""
CALL db.index.vector.queryNodes('{index}', $k, $vector) YIELD node, score AS similarity
WITH node AS n, similarity WHERE n.kb = $kb AND ($level IS NULL OR n.level = $level)
WITH n, 2.0 * similarity - 1.0 AS score
ORDER BY score DESC, n.id
LIMIT $limit
"""
        + fields
    )


# Every KB's chunk vectors: the chunk vector index's size (bulk_load).
COUNT_CHUNK_VECTORS: Final = "MATCH (n:Chunk) WHERE n.embedding IS NOT NULL RETURN count(n) AS vectors"

CHUNK_VECTOR_PROBE: Final = _vector_probe("Chunk")
CHUNK_VECTOR_EXACT: Final = _vector_exact("Chunk", _CHUNK_COLUMNS + _CHUNK_ROWS)
CHUNK_VECTOR_INDEXED: Final = _vector_indexed(CHUNK_VECTOR_INDEX, _CHUNK_COLUMNS + _CHUNK_ROWS)

ENTITY_VECTOR_PROBE: Final = _vector_probe("Entity")
ENTITY_VECTOR_EXACT: Final = _vector_exact("Entity", _ENTITY_COLUMNS + _ENTITY_ROWS)
ENTITY_VECTOR_INDEXED: Final = _vector_indexed(ENTITY_VECTOR_INDEX, _ENTITY_COLUMNS + _ENTITY_ROWS)

COMMUNITY_VECTOR_PROBE: Final = _vector_probe("Community")
COMMUNITY_VECTOR_EXACT: Final = _vector_exact("Community", _COMMUNITY_COLUMNS + _COMMUNITY_ROWS)
COMMUNITY_VECTOR_INDEXED: Final = _vector_indexed(COMMUNITY_VECTOR_INDEX, _COMMUNITY_COLUMNS + _COMMUNITY_ROWS)

# -- health and test support ----------------------------------------------------------------------------------

PING: Final = "RETURN 1 AS ok"

# -- the routing profile ---------------------------------------------------------------------------------------

# $uids: `kbt:term` of every (KB, term) asked: one unique-index seek each, whatever the KBs' size.
TERM_FREQUENCIES: Final = (
    "UNWIND $uids AS uid MATCH (t:RoutingTerm {uid: uid}) WITH t.kb AS kb, t.term AS term, t.chunks AS chunks"
    + _rows("kb", "term", "chunks")
)

# Documents written before the store kept profiles (`neo4j/profile.py` counts them when the store opens).
DOCUMENTS_WITHOUT_PROFILE: Final = """
MATCH (d:Document) WHERE d.profile_terms IS NULL
WITH d LIMIT $limit
RETURN d.uid AS uid, d.kb AS kb, d.title AS title,
    COLLECT { MATCH (c:Chunk)-[:PART_OF]->(d) RETURN c.text ORDER BY c.ordinal } AS texts"""

# Under each document's write lock, so that two processes opening the store count a document once.
ADD_PROFILES: Final = """
UNWIND $documents AS p
MATCH (d:Document {uid: p.uid})
SET d._lock = true REMOVE d._lock
WITH d, p WHERE d.profile_terms IS NULL
CALL (d, p) {
    UNWIND range(0, size(p.profile_terms) - 1) AS i
    MERGE (t:RoutingTerm {uid: d.kbt + ':' + p.profile_terms[i]})
    ON CREATE SET t.kb = d.kb, t.kbt = d.kbt, t.term = p.profile_terms[i], t.chunks = 0
    SET t.chunks = t.chunks + p.profile_chunks[i]
}
SET d.profile_terms = p.profile_terms, d.profile_chunks = p.profile_chunks"""

# Everything this store writes, in every KB: for test fixtures that own the whole database.
DELETE_ALL_GRAPH_NODES: Final = """
MATCH (n)
WHERE n:KnowledgeBase OR n:Document OR n:Chunk OR n:Entity OR n:Community OR n:RelationMention OR n:CommunitySet
    OR n:RoutingTerm
DETACH DELETE n"""
