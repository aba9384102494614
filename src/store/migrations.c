/*
 * migrations.c - the database schema, as numbered migrations.
 *
 * store_migrations[i] takes the schema from version i to i + 1; `PRAGMA
 * user_version` holds the number applied. store_open() runs each pending one
 * in its own transaction together with the user_version bump, so a crash
 * leaves the database at a whole version. Rules: never edit a migration that
 * has shipped; add a new one at the end. A table that stores blob names must
 * also be named in store_blob_refs (blob.c) or its blobs get swept.
 *
 * Conventions of the schema:
 * - Listed tables carry `seq INTEGER PRIMARY KEY` (the rowid, so stable
 *   across VACUUM) and `id TEXT NOT NULL UNIQUE` as the API key; listings
 *   order by (created_at, seq), which is total even within one second.
 * - Times are INTEGER Unix seconds; optional ones are NULL when absent.
 * - body/metadata/payload/session columns are TEXT the API layer serialized
 *   (JSON); the store never parses them.
 * - Items belong to their owner with ON DELETE CASCADE (foreign_keys=ON is
 *   set on every connection) and are ordered by a per-owner seq.
 */
#include <stddef.h>

#include "store/store_int.h"

static const char migration_1[] =
    /* Files: uploaded content; the bytes live in blobs/<blob>. */
    "CREATE TABLE files ("
    "  seq INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE,"
    "  object TEXT NOT NULL DEFAULT 'file',"
    "  purpose TEXT NOT NULL,"
    "  filename TEXT NOT NULL,"
    "  bytes INTEGER NOT NULL CHECK (bytes >= 0),"
    "  created_at INTEGER NOT NULL,"
    "  expires_at INTEGER,"
    "  status TEXT NOT NULL DEFAULT 'processed',"
    "  status_details TEXT,"
    "  mime_type TEXT,"
    "  blob TEXT NOT NULL UNIQUE"
    ");"
    "CREATE INDEX files_by_created ON files (created_at);"
    "CREATE INDEX files_by_purpose ON files (purpose, created_at);"
    "CREATE INDEX files_by_expiry ON files (expires_at) WHERE expires_at IS NOT NULL;"

    /* Uploads: a large file sent in parts; completing one creates a file. */
    "CREATE TABLE uploads ("
    "  seq INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE,"
    "  created_at INTEGER NOT NULL,"
    "  expires_at INTEGER,"
    "  filename TEXT NOT NULL,"
    "  purpose TEXT NOT NULL,"
    "  bytes INTEGER NOT NULL CHECK (bytes >= 0),"
    "  mime_type TEXT,"
    "  status TEXT NOT NULL DEFAULT 'pending',"
    "  file_id TEXT REFERENCES files (id) ON DELETE SET NULL"
    ");"
    "CREATE INDEX uploads_by_created ON uploads (created_at);"
    "CREATE INDEX uploads_by_expiry ON uploads (expires_at) WHERE expires_at IS NOT NULL;"
    "CREATE TABLE upload_parts ("
    "  seq INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE,"
    "  upload_id TEXT NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,"
    "  created_at INTEGER NOT NULL,"
    "  bytes INTEGER NOT NULL CHECK (bytes >= 0),"
    "  blob TEXT NOT NULL UNIQUE"
    ");"
    "CREATE INDEX upload_parts_by_upload ON upload_parts (upload_id, seq);"

    /* Responses and their input/output items. previous_response_id and
     * conversation_id are plain references (no foreign key): deleting a
     * response or a conversation does not rewrite the responses that
     * point at it. */
    "CREATE TABLE responses ("
    "  seq INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  status TEXT NOT NULL,"
    "  model TEXT NOT NULL DEFAULT '',"
    "  previous_response_id TEXT,"
    "  conversation_id TEXT,"
    "  stored INTEGER NOT NULL DEFAULT 1 CHECK (stored IN (0, 1)),"
    "  body TEXT NOT NULL"
    ");"
    "CREATE INDEX responses_by_created ON responses (created_at);"
    "CREATE INDEX responses_by_previous ON responses (previous_response_id)"
    "  WHERE previous_response_id IS NOT NULL;"
    "CREATE INDEX responses_by_conversation ON responses (conversation_id, created_at)"
    "  WHERE conversation_id IS NOT NULL;"
    "CREATE TABLE response_items ("
    "  response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL,"
    "  item_id TEXT NOT NULL,"
    "  kind TEXT NOT NULL CHECK (kind IN ('input', 'output')),"
    "  created_at INTEGER NOT NULL,"
    "  body TEXT NOT NULL,"
    "  PRIMARY KEY (response_id, seq)"
    ");"
    "CREATE INDEX response_items_by_item ON response_items (response_id, item_id);"
    "CREATE INDEX response_items_by_kind ON response_items (response_id, kind, seq);"

    /* Conversations and their items (item ids unique per conversation). */
    "CREATE TABLE conversations ("
    "  seq INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  metadata TEXT"
    ");"
    "CREATE INDEX conversations_by_created ON conversations (created_at);"
    "CREATE TABLE conversation_items ("
    "  conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL,"
    "  item_id TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  body TEXT NOT NULL,"
    "  PRIMARY KEY (conversation_id, seq)"
    ");"
    "CREATE UNIQUE INDEX conversation_items_by_item ON conversation_items (conversation_id, item_id);"

    /* Jobs: model downloads and other long work that must survive a restart. */
    "CREATE TABLE jobs ("
    "  seq INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE,"
    "  kind TEXT NOT NULL,"
    "  name TEXT NOT NULL DEFAULT '',"
    "  state TEXT NOT NULL,"
    "  bytes_done INTEGER NOT NULL DEFAULT 0,"
    "  bytes_total INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  payload TEXT"
    ");"
    "CREATE INDEX jobs_by_created ON jobs (created_at);"
    "CREATE INDEX jobs_by_kind ON jobs (kind, created_at);"

    /* Ephemeral realtime keys, by hash of the key (never the key). */
    "CREATE TABLE ephemeral_keys ("
    "  key_hash TEXT PRIMARY KEY,"
    "  created_at INTEGER NOT NULL,"
    "  expires_at INTEGER NOT NULL,"
    "  session TEXT"
    ");"
    "CREATE INDEX ephemeral_keys_by_expiry ON ephemeral_keys (expires_at);";

const char *const store_migrations[] = {
    migration_1,
};

const size_t store_n_migrations = sizeof store_migrations / sizeof store_migrations[0];
