// setup.mjs - what the Ollama API tests share: a server over a generated
// models directory (org/tiny, a random-weight llama with a small chat
// template that mentions tools; embed, a random-weight bert), the official
// `ollama` client pointed at it, and helpers for raw NDJSON requests.
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

export const MODEL = 'org/tiny';
export const EMBED = 'embed';

// Starts a server; returns { srv, client, models, skip } (skip: a reason).
// prepare(dir), when given, may add files to the models directory first.
export async function setup({ bert = false, args = [], prepare = null } = {}) {
  const models = await makeModelsDir({ bert });
  if (models.skip) return { skip: models.skip };
  if (prepare) await prepare(models.dir);
  const srv = await startServer({
    args: ['--models-dir', models.dir, '--parallel', '2', ...args],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  const client = new Ollama({ host: srv.url });
  return { srv, client, models, bertSkip: models.bertSkip };
}

export async function teardown(ctx) {
  if (ctx?.srv) await ctx.srv.stop();
  if (ctx?.models?.cleanup) ctx.models.cleanup();
}

// POSTs JSON (or a raw string) and returns { status, type, text, lines }.
export async function post(srv, path, body, method = 'POST') {
  const r = await fetch(`${srv.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, type: r.headers.get('content-type') ?? '', text, json: () => JSON.parse(text) };
}

// Splits an NDJSON body, asserting Ollama's framing: one JSON object per
// line, every line terminated, no blank lines.
export function ndjson(text) {
  assert.ok(text.endsWith('\n'), 'the stream ends with a newline');
  const lines = text.slice(0, -1).split('\n');
  for (const l of lines) assert.notEqual(l, '', 'no blank lines in an NDJSON stream');
  return lines.map((l) => JSON.parse(l));
}

// The invariants of a final (done) record.
export function checkDone(rec, { generate = false } = {}) {
  assert.equal(rec.done, true);
  assert.ok(['stop', 'length'].includes(rec.done_reason), rec.done_reason);
  for (const k of ['total_duration', 'load_duration', 'prompt_eval_duration', 'eval_duration', 'prompt_eval_count', 'eval_count']) {
    assert.equal(typeof rec[k], 'number', k);
    assert.ok(Number.isInteger(rec[k]) && rec[k] > 0, `${k} = ${rec[k]}`);
  }
  assert.ok(rec.total_duration >= rec.eval_duration, 'total covers eval');
  assert.ok(!Number.isNaN(Date.parse(rec.created_at)), 'created_at is RFC 3339');
  if (generate) {
    assert.ok(Array.isArray(rec.context) && rec.context.length > rec.prompt_eval_count - 1, 'context holds the prompt');
    for (const t of rec.context) assert.ok(Number.isInteger(t) && t >= 0);
  }
}
