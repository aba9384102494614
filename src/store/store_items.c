/*
 * store_items.c - stored Responses, Conversations, and the ordered items
 * that belong to each (response_items, conversation_items).
 *
 * Items are numbered per owner by seq, from 1, assigned here inside the
 * append transaction (max(seq) + 1), so an owner's items list in the order
 * they were appended. Deleting the owner deletes its items (ON DELETE
 * CASCADE). The two item tables share one code path, described by a
 * struct item_table of literal SQL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "store/store_int.h"

/* ---- rows ---------------------------------------------------------------------- */

void store_item_free(store_item *it) {
  if (!it) return;
  free(it->item_id);
  free(it->kind);
  free(it->body);
  memset(it, 0, sizeof *it);
}

void store_item_list_free(store_item_list *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n_items; i++) store_item_free(&l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

void store_response_free(store_response *r) {
  if (!r) return;
  free(r->id);
  free(r->status);
  free(r->model);
  free(r->previous_response_id);
  free(r->conversation_id);
  free(r->body);
  memset(r, 0, sizeof *r);
}

void store_conversation_free(store_conversation *c) {
  if (!c) return;
  free(c->id);
  free(c->metadata);
  memset(c, 0, sizeof *c);
}

/* Columns: item_id, kind, body, seq, created_at. */
static int item_read(sqlite3_stmt *st, void *elem) {
  store_item *it = elem;
  bool oom = false;
  it->item_id = store_col_text(st, 0, &oom);
  it->kind = store_col_text(st, 1, &oom);
  it->body = store_col_text(st, 2, &oom);
  it->seq = sqlite3_column_int64(st, 3);
  it->created_at = sqlite3_column_int64(st, 4);
  return oom ? ERR_NOMEM : 0;
}

static void item_free_elem(void *elem) { store_item_free(elem); }

/* ---- shared helpers --------------------------------------------------------------- */

/* Runs a single-row SELECT bound to ?1 = id and reads it with read();
 * ERR_NOT_FOUND naming `what` when there is no row. Caller holds the lock. */
static int get_one(store *s, const char *sql, const char *id, const char *id2, const char *what,
                   store_row_read_fn read, void *out) {
  sqlite3_stmt *st;
  int rc = store_stmt(s, sql, &st);
  if (rc) return rc;
  store_bind_text(st, 1, id);
  if (id2) store_bind_text(st, 2, id2);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    rc = read(st, out);
    if (rc) rc = err_set(ERR_NOMEM, "reading %s %s", what, id);
  } else if (step == SQLITE_DONE) {
    rc = id2 ? err_set(ERR_NOT_FOUND, "no %s '%s' in '%s'", what, id2, id)
             : err_set(ERR_NOT_FOUND, "no %s with id '%s'", what, id);
  } else {
    rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), what);
  }
  store_stmt_done(st);
  return rc;
}

/* Runs a write bound to ?1 = id (and ?2 = id2); ERR_NOT_FOUND when it
 * changed no row. Caller holds the lock. */
static int write_one(store *s, const char *sql, const char *id, const char *id2, const char *what) {
  sqlite3_stmt *st;
  int rc = store_stmt(s, sql, &st);
  if (rc) return rc;
  store_bind_text(st, 1, id);
  if (id2) store_bind_text(st, 2, id2);
  rc = store_step_done(s, st, what);
  if (!rc && sqlite3_changes(s->db) == 0) {
    rc = id2 ? err_set(ERR_NOT_FOUND, "no %s '%s' in '%s'", what, id2, id)
             : err_set(ERR_NOT_FOUND, "no %s with id '%s'", what, id);
  }
  return rc;
}

static int exists(store *s, const char *sql, const char *id, const char *what) {
  sqlite3_stmt *st;
  int rc = store_stmt(s, sql, &st);
  if (rc) return rc;
  store_bind_text(st, 1, id);
  int step = sqlite3_step(st);
  if (step == SQLITE_DONE) rc = err_set(ERR_NOT_FOUND, "no %s with id '%s'", what, id);
  else if (step != SQLITE_ROW) rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), what);
  store_stmt_done(st);
  return rc;
}

/* ---- item tables ------------------------------------------------------------------- */

struct item_table {
  const char *owner_what;   /* "response" */
  const char *owner_exists; /* ?1 = owner id */
  const char *max_seq;      /* ?1 = owner id */
  const char *insert;       /* ?1 owner, ?2 seq, ?3 item_id, ?4 kind, ?5 created_at, ?6 body */
  const char *item_table;   /* for listings */
  const char *cols;         /* item_id, kind, body, seq, created_at */
  const char *owner_col;
  bool has_kind;
};

static const struct item_table response_items = {
    .owner_what = "response",
    .owner_exists = "SELECT 1 FROM responses WHERE id = ?1",
    .max_seq = "SELECT coalesce(max(seq), 0) FROM response_items WHERE response_id = ?1",
    .insert = "INSERT INTO response_items (response_id, seq, item_id, kind, created_at, body)"
              " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    .item_table = "response_items",
    .cols = "item_id, kind, body, seq, created_at",
    .owner_col = "response_id",
    .has_kind = true,
};

static const struct item_table conversation_items = {
    .owner_what = "conversation",
    .owner_exists = "SELECT 1 FROM conversations WHERE id = ?1",
    .max_seq = "SELECT coalesce(max(seq), 0) FROM conversation_items WHERE conversation_id = ?1",
    .insert = "INSERT INTO conversation_items (conversation_id, seq, item_id, created_at, body)"
              " VALUES (?1, ?2, ?3, ?5, ?6)",
    .item_table = "conversation_items",
    .cols = "item_id, NULL, body, seq, created_at",
    .owner_col = "conversation_id",
    .has_kind = false,
};

static int items_validate(const struct item_table *t, const store_item *items, size_t n_items) {
  for (size_t i = 0; i < n_items; i++) {
    const store_item *it = &items[i];
    if (!it->item_id || !*it->item_id) return err_set(ERR_INVALID, "item %zu: item_id is missing", i);
    if (!it->body) return err_set(ERR_INVALID, "item %zu (%s): body is missing", i, it->item_id);
    if (t->has_kind && (!it->kind || (strcmp(it->kind, "input") != 0 && strcmp(it->kind, "output") != 0))) {
      return err_set(ERR_INVALID, "item %zu (%s): kind '%s' is not 'input' or 'output'", i, it->item_id,
                     it->kind ? it->kind : "(null)");
    }
  }
  return 0;
}

/* Appends within a transaction (nested as a savepoint when one is open). */
static int items_append(store *s, const struct item_table *t, const char *owner_id, const store_item *items,
                        size_t n_items) {
  int rc = items_validate(t, items, n_items);
  if (rc) return rc;
  rc = store_begin(s);
  if (rc) return rc;
  rc = exists(s, t->owner_exists, owner_id, t->owner_what);
  int64_t seq = 0;
  sqlite3_stmt *st;
  if (!rc) rc = store_stmt(s, t->max_seq, &st);
  if (!rc) {
    store_bind_text(st, 1, owner_id);
    if (sqlite3_step(st) == SQLITE_ROW) seq = sqlite3_column_int64(st, 0);
    else rc = store_sqlite_err(s, sqlite3_extended_errcode(s->db), "reading the last item seq");
    store_stmt_done(st);
  }
  for (size_t i = 0; !rc && i < n_items; i++) {
    rc = store_stmt(s, t->insert, &st);
    if (rc) break;
    store_bind_text(st, 1, owner_id);
    sqlite3_bind_int64(st, 2, ++seq);
    store_bind_text(st, 3, items[i].item_id);
    if (t->has_kind) store_bind_text(st, 4, items[i].kind);
    sqlite3_bind_int64(st, 5, items[i].created_at);
    store_bind_text(st, 6, items[i].body);
    char what[200];
    snprintf(what, sizeof what, "appending item %s to %s %s", items[i].item_id, t->owner_what, owner_id);
    rc = store_step_done(s, st, what);
  }
  if (rc) {
    store_rollback(s);
    return rc;
  }
  return store_commit(s);
}

static int items_list(store *s, const struct item_table *t, const char *owner_id, const char *kind,
                      const store_page *page, store_item_list *out) {
  memset(out, 0, sizeof *out);
  char scope[96];
  snprintf(scope, sizeof scope, kind ? "%s = ?1 AND kind = ?2" : "%s = ?1", t->owner_col);
  struct store_page_spec spec = {
      .from = t->item_table,
      .cols = t->cols,
      .id_col = "item_id",
      .key = {"seq", NULL},
      .scope = scope,
      .scope_args = {owner_id, kind},
      .n_scope_args = kind ? 2 : 1,
      .what = "item",
  };
  struct store_rows rows = {.elem_size = sizeof(store_item)};
  store_lock(s);
  int rc = exists(s, t->owner_exists, owner_id, t->owner_what);
  if (!rc) rc = store_page_run(s, &spec, page, item_read, item_free_elem, &rows, &out->has_more);
  store_unlock(s);
  if (rc) return rc;
  out->items = rows.items;
  out->n_items = rows.n;
  return 0;
}

/* ---- responses ---------------------------------------------------------------------- */

#define RESPONSE_COLS "id, created_at, updated_at, status, model, previous_response_id, conversation_id, stored, body"

static int response_read(sqlite3_stmt *st, void *elem) {
  store_response *r = elem;
  bool oom = false;
  r->id = store_col_text(st, 0, &oom);
  r->created_at = sqlite3_column_int64(st, 1);
  r->updated_at = sqlite3_column_int64(st, 2);
  r->status = store_col_text(st, 3, &oom);
  r->model = store_col_text(st, 4, &oom);
  r->previous_response_id = store_col_text(st, 5, &oom);
  r->conversation_id = store_col_text(st, 6, &oom);
  r->stored = sqlite3_column_int(st, 7) != 0;
  r->body = store_col_text(st, 8, &oom);
  return oom ? ERR_NOMEM : 0;
}

int store_response_put(store *s, const store_response *r) {
  if (!r->id || !*r->id) return err_set(ERR_INVALID, "response row: id is missing");
  if (!r->status) return err_set(ERR_INVALID, "response %s: status is missing", r->id);
  if (!r->body) return err_set(ERR_INVALID, "response %s: body is missing", r->id);
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s,
                      "INSERT INTO responses (id, created_at, updated_at, status, model, previous_response_id,"
                      " conversation_id, stored, body) VALUES (?1, ?2, ?3, ?4, coalesce(?5, ''), ?6, ?7, ?8, ?9)"
                      " ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, status = excluded.status,"
                      " model = excluded.model, previous_response_id = excluded.previous_response_id,"
                      " conversation_id = excluded.conversation_id, stored = excluded.stored, body = excluded.body",
                      &st);
  if (!rc) {
    store_bind_text(st, 1, r->id);
    sqlite3_bind_int64(st, 2, r->created_at);
    sqlite3_bind_int64(st, 3, r->updated_at ? r->updated_at : r->created_at);
    store_bind_text(st, 4, r->status);
    store_bind_text(st, 5, r->model);
    store_bind_text(st, 6, r->previous_response_id);
    store_bind_text(st, 7, r->conversation_id);
    sqlite3_bind_int(st, 8, r->stored ? 1 : 0);
    store_bind_text(st, 9, r->body);
    char what[160];
    snprintf(what, sizeof what, "storing response %s", r->id);
    rc = store_step_done(s, st, what);
  }
  store_unlock(s);
  return rc;
}

int store_response_get(store *s, const char *id, store_response *out) {
  memset(out, 0, sizeof *out);
  store_lock(s);
  int rc = get_one(s, "SELECT " RESPONSE_COLS " FROM responses WHERE id = ?1", id, NULL, "response",
                   response_read, out);
  store_unlock(s);
  if (rc) store_response_free(out);
  return rc;
}

int store_response_delete(store *s, const char *id) {
  store_lock(s);
  int rc = write_one(s, "DELETE FROM responses WHERE id = ?1", id, NULL, "response");
  store_unlock(s);
  return rc;
}

int store_response_items_append(store *s, const char *response_id, const store_item *items, size_t n_items) {
  return items_append(s, &response_items, response_id, items, n_items);
}

int store_response_items_list(store *s, const char *response_id, const char *kind, const store_page *page,
                              store_item_list *out) {
  return items_list(s, &response_items, response_id, kind, page, out);
}

/* ---- conversations -------------------------------------------------------------------- */

static int conversation_read(sqlite3_stmt *st, void *elem) {
  store_conversation *c = elem;
  bool oom = false;
  c->id = store_col_text(st, 0, &oom);
  c->created_at = sqlite3_column_int64(st, 1);
  c->updated_at = sqlite3_column_int64(st, 2);
  c->metadata = store_col_text(st, 3, &oom);
  return oom ? ERR_NOMEM : 0;
}

int store_conversation_create(store *s, const store_conversation *c, const store_item *items, size_t n_items) {
  if (!c->id || !*c->id) return err_set(ERR_INVALID, "conversation row: id is missing");
  int rc = items_validate(&conversation_items, items, n_items);
  if (rc) return rc;
  rc = store_begin(s);
  if (rc) return rc;
  sqlite3_stmt *st;
  rc = store_stmt(s, "INSERT INTO conversations (id, created_at, updated_at, metadata) VALUES (?1, ?2, ?3, ?4)",
                  &st);
  if (!rc) {
    store_bind_text(st, 1, c->id);
    sqlite3_bind_int64(st, 2, c->created_at);
    sqlite3_bind_int64(st, 3, c->updated_at ? c->updated_at : c->created_at);
    store_bind_text(st, 4, c->metadata);
    char what[160];
    snprintf(what, sizeof what, "creating conversation %s", c->id);
    rc = store_step_done(s, st, what);
  }
  if (!rc && n_items) rc = items_append(s, &conversation_items, c->id, items, n_items);
  if (rc) {
    store_rollback(s);
    return rc;
  }
  return store_commit(s);
}

int store_conversation_get(store *s, const char *id, store_conversation *out) {
  memset(out, 0, sizeof *out);
  store_lock(s);
  int rc = get_one(s, "SELECT id, created_at, updated_at, metadata FROM conversations WHERE id = ?1", id, NULL,
                   "conversation", conversation_read, out);
  store_unlock(s);
  if (rc) store_conversation_free(out);
  return rc;
}

int store_conversation_update_metadata(store *s, const char *id, const char *metadata, int64_t updated_at) {
  store_lock(s);
  sqlite3_stmt *st;
  int rc = store_stmt(s, "UPDATE conversations SET metadata = ?2, updated_at = ?3 WHERE id = ?1", &st);
  if (!rc) {
    store_bind_text(st, 1, id);
    store_bind_text(st, 2, metadata);
    sqlite3_bind_int64(st, 3, updated_at);
    rc = store_step_done(s, st, "updating conversation metadata");
    if (!rc && sqlite3_changes(s->db) == 0) rc = err_set(ERR_NOT_FOUND, "no conversation with id '%s'", id);
  }
  store_unlock(s);
  return rc;
}

int store_conversation_delete(store *s, const char *id) {
  store_lock(s);
  int rc = write_one(s, "DELETE FROM conversations WHERE id = ?1", id, NULL, "conversation");
  store_unlock(s);
  return rc;
}

int store_conversation_items_append(store *s, const char *conversation_id, const store_item *items,
                                    size_t n_items) {
  return items_append(s, &conversation_items, conversation_id, items, n_items);
}

int store_conversation_items_list(store *s, const char *conversation_id, const store_page *page,
                                  store_item_list *out) {
  return items_list(s, &conversation_items, conversation_id, NULL, page, out);
}

int store_conversation_item_get(store *s, const char *conversation_id, const char *item_id, store_item *out) {
  memset(out, 0, sizeof *out);
  store_lock(s);
  int rc = exists(s, conversation_items.owner_exists, conversation_id, "conversation");
  if (!rc) {
    rc = get_one(s,
                 "SELECT item_id, NULL, body, seq, created_at FROM conversation_items"
                 " WHERE conversation_id = ?1 AND item_id = ?2",
                 conversation_id, item_id, "conversation item", item_read, out);
  }
  store_unlock(s);
  if (rc) store_item_free(out);
  return rc;
}

int store_conversation_item_delete(store *s, const char *conversation_id, const char *item_id) {
  store_lock(s);
  int rc = exists(s, conversation_items.owner_exists, conversation_id, "conversation");
  if (!rc) {
    rc = write_one(s, "DELETE FROM conversation_items WHERE conversation_id = ?1 AND item_id = ?2",
                   conversation_id, item_id, "conversation item");
  }
  store_unlock(s);
  return rc;
}
