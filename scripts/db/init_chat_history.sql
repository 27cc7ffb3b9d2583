-- Conversation history schema (SPEC §6), version 3.
--
-- Idempotent: every statement is IF NOT EXISTS / ON CONFLICT DO NOTHING, so running it again is a
-- no-op. The Postgres adapter applies it at start-up inside one transaction holding an advisory lock,
-- because concurrent CREATE ... IF NOT EXISTS can still collide. By hand: psql -1 -f init_chat_history.sql
-- Tables are created in the first schema of the search_path.
-- Requires PostgreSQL 13+ (gen_random_uuid() is built in).

CREATE TABLE IF NOT EXISTS schema_version (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS conversations (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    text        NOT NULL,
    session_id text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT conversations_user_session_key UNIQUE (user_id, session_id)
);

CREATE TABLE IF NOT EXISTS messages (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Insertion order: created_at can tie (same clock tick), seq never does.
    seq             bigint      GENERATED ALWAYS AS IDENTITY,
    conversation_id uuid        NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role            text        NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    content         text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    citations       jsonb       NOT NULL DEFAULT '[]'::jsonb,
    debug           jsonb,
    completed       boolean     NOT NULL DEFAULT true,
    request_id      text
);

-- Version 2: an answer names the question it replies to and goes with it, so a clear racing a stream leaves no
-- answer behind (the answer's insert locks the question's row; the clear either takes the answer along or wins).
ALTER TABLE messages ADD COLUMN IF NOT EXISTS reply_to uuid REFERENCES messages (id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS messages_reply_to_idx ON messages (reply_to) WHERE reply_to IS NOT NULL;

-- Version 3: an answer's citations are the sources its text cites; the other sources it was given are kept apart.
ALTER TABLE messages ADD COLUMN IF NOT EXISTS consulted jsonb NOT NULL DEFAULT '[]'::jsonb;

-- History reads: one conversation, newest first by seq.
CREATE INDEX IF NOT EXISTS messages_conversation_seq_idx ON messages (conversation_id, seq);

-- Retried appends (same request, same role) land on the existing row instead of duplicating it.
CREATE UNIQUE INDEX IF NOT EXISTS messages_request_once_idx
    ON messages (conversation_id, request_id, role)
    WHERE request_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS feedback (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id  uuid        NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    query       text        NOT NULL DEFAULT '',
    is_positive boolean     NOT NULL,
    thread_id   text        NOT NULL DEFAULT '',
    agent_type  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    metadata    jsonb       NOT NULL DEFAULT '{}'::jsonb
);

CREATE INDEX IF NOT EXISTS feedback_message_idx ON feedback (message_id);

INSERT INTO schema_version (version) VALUES (1), (2), (3) ON CONFLICT (version) DO NOTHING;
