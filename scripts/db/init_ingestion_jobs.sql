-- Ingestion jobs (docs/architecture.md, "Jobs"): the jobs, their batches and their documents.
--
-- Idempotent, like init_chat_history.sql; the job store applies it at start-up inside one transaction holding
-- an advisory lock. The queue that delivers the batches to workers is procrastinate's (its own schema, applied
-- by the worker side: `procrastinate_*` tables).

CREATE TABLE IF NOT EXISTS ingestion_jobs (
    id                   uuid        PRIMARY KEY,
    kb_prefix            text        NOT NULL,
    status               text        NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    created_by           text        NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at           timestamptz,
    finished_at          timestamptz,
    total                integer     NOT NULL,
    processed            integer     NOT NULL DEFAULT 0,
    batches              integer     NOT NULL,
    documents_added      integer     NOT NULL DEFAULT 0,
    documents_unchanged  integer     NOT NULL DEFAULT 0,
    documents_replaced   integer     NOT NULL DEFAULT 0,
    documents_failed     integer     NOT NULL DEFAULT 0,
    chunks_written       integer     NOT NULL DEFAULT 0,
    entity_mentions      integer     NOT NULL DEFAULT 0,
    relation_mentions    integer     NOT NULL DEFAULT 0,
    model_calls          integer     NOT NULL DEFAULT 0,
    extraction_fallbacks integer     NOT NULL DEFAULT 0,
    error                text
);
CREATE INDEX IF NOT EXISTS ingestion_jobs_kb_idx ON ingestion_jobs (kb_prefix, created_at);

-- A batch is held by one worker at a time: `worker` and its last heartbeat. One whose worker stopped sending
-- heartbeats is taken by the next worker that gets it. `dispatched`: put in the queue (a batch stored by a
-- process that died before queueing it is queued by the workers' upkeep).
CREATE TABLE IF NOT EXISTS ingestion_batches (
    job_id       uuid        NOT NULL REFERENCES ingestion_jobs (id) ON DELETE CASCADE,
    batch        integer     NOT NULL,
    status       text        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done')),
    worker       text,
    heartbeat_at timestamptz,
    dispatched   boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, batch)
);
CREATE INDEX IF NOT EXISTS ingestion_batches_undispatched_idx ON ingestion_batches (created_at) WHERE NOT dispatched;
CREATE INDEX IF NOT EXISTS ingestion_batches_open_idx ON ingestion_batches (job_id) WHERE status != 'done';

-- A document's text is kept until it is indexed.
CREATE TABLE IF NOT EXISTS ingestion_documents (
    job_id   uuid    NOT NULL REFERENCES ingestion_jobs (id) ON DELETE CASCADE,
    position integer NOT NULL,
    batch    integer NOT NULL,
    title    text    NOT NULL,
    source   text    NOT NULL,
    text     text    NOT NULL,
    metadata jsonb   NOT NULL,
    status   text    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    doc_id   text    NOT NULL DEFAULT '',
    error    text    NOT NULL DEFAULT '',
    PRIMARY KEY (job_id, position)
);
CREATE INDEX IF NOT EXISTS ingestion_documents_batch_idx ON ingestion_documents (job_id, batch, status);
