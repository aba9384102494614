// auth.test.mjs - LM Studio routes with an API key configured (spec
// ../shared/specs/lmstudio.md section 0 and check 27): without
// `Authorization: Bearer` every route fails with 401 in the LM Studio error
// shape; with it the routes answer; the SDK's discovery probe
// /lmstudio-greeting stays open. Unknown routes are 404 in the same shape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../lib/server.mjs';
import { assertError } from './lib.mjs';

let srv;
before(async () => {
  srv = await startServer({ args: ['--api-key', 'sekret'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => { if (srv) await srv.stop(); });

const call = async (path, { key, method = 'GET', body } = {}) => {
  const headers = key ? { authorization: `Bearer ${key}` } : {};
  if (body) headers['content-type'] = 'application/json';
  const r = await fetch(srv.url + path, { method, headers, body: body && JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, text, json };
};

test('27. without a key every LM Studio route is 401 with an error object; with it they answer', async () => {
  for (const p of ['/api/v0/models', '/api/v1/models', '/lmstudio/v1/models', '/api/v1/models/download/status']) {
    assertError(await call(p), 401);
    assertError(await call(p, { key: 'wrong' }), 401);
    assert.equal((await call(p, { key: 'sekret' })).status, 200, p);
  }
  assertError(await call('/api/v1/chat', { method: 'POST', body: { model: 'x', input: 'hi' } }), 401);
});

test('28. /lmstudio-greeting needs no key', async () => {
  const r = await call('/lmstudio-greeting');
  assert.equal(r.status, 200);
  assert.equal(r.json.lmstudio, true);
});

test('unknown LM Studio routes are 404 in the error object shape', async () => {
  assertError(await call('/api/v1/nothing-here', { key: 'sekret' }), 404);
  assertError(await call('/api/v0/nothing', { key: 'sekret' }), 404);
});
