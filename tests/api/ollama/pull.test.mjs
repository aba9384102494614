// pull.test.mjs - POST /api/pull through the official `ollama` client
// against a loopback fake Ollama registry (lib/fakehub.mjs): the progress
// stream (pulling manifest, per-layer digest/total/completed, verifying,
// writing manifest, success), stream:false, `name` and `model`, failures
// as an {"error"} line or status, and the pulled model in list, chat and
// delete.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { Ollama } from 'ollama';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';
import { startFakeHub } from '../lib/fakehub.mjs';
import { post, ndjson } from './setup.mjs';

let models, hub, srv, client, skip;
before(async () => {
  models = await makeModelsDir();
  if (models.skip) { skip = models.skip; return; }
  hub = await startFakeHub({ modelPath: path.join(models.dir, 'org/tiny.gguf') });
  srv = await startServer({ env: hub.env });
  client = new Ollama({ host: srv.url });
});
after(async () => {
  if (srv) await srv.stop();
  if (hub) await hub.stop();
  if (models?.cleanup) models.cleanup();
});

test('pull streams progress records ending in success; the model is then listed and chats', async (t) => {
  if (skip) return t.skip(skip);
  hub.fault = { mode: 'slow', chunk: 1 << 20, delayMs: 20 };
  const recs = [];
  try {
    for await (const r of await client.pull({ model: 'tiny:1b', stream: true })) recs.push(r);
  } finally { hub.fault = null; }
  const st = recs.map((r) => r.status);
  assert.equal(st[0], 'pulling manifest');
  assert.equal(st.at(-1), 'success');
  assert.ok(st.indexOf('verifying sha256 digest') < st.indexOf('writing manifest'));
  const layer = recs.filter((r) => r.digest === `sha256:${hub.modelSha}`);
  assert.ok(layer.length >= 1, JSON.stringify(recs));
  for (const r of layer) {
    assert.equal(r.status, `pulling ${hub.modelSha.slice(0, 12)}`);
    assert.ok(r.total > 0);
    if ('completed' in r) assert.ok(r.completed > 0 && r.completed <= r.total);
  }
  assert.equal(layer.at(-1).completed, layer.at(-1).total);
  const names = (await client.list()).models.map((m) => m.name);
  assert.ok(names.includes('tiny:1b'), names.join());
  const c = await client.chat({ model: 'tiny:1b', messages: [{ role: 'user', content: 'hi' }], stream: false, options: { num_predict: 2 } });
  assert.equal(c.done, true);
});

test('pull stream:false answers {"status":"success"}; raw requests take model or name', async (t) => {
  if (skip) return t.skip(skip);
  assert.deepEqual(await client.pull({ model: 'tiny:latest' }), { status: 'success' });
  const r = await post(srv, '/api/pull', { model: 'tiny:latest' });
  assert.match(r.type, /application\/x-ndjson/);
  const recs = ndjson(r.text);
  assert.equal(recs.at(-1).status, 'success');
});

test('pull failures: unknown model is an error line (stream) or an error status; bad names 400', async (t) => {
  if (skip) return t.skip(skip);
  await assert.rejects(async () => { for await (const _ of await client.pull({ model: 'nothere:1b', stream: true })) { /* drain */ } }, /./);
  await assert.rejects(client.pull({ model: 'nothere:1b' }), (e) => e.status_code >= 400);
  assert.equal((await post(srv, '/api/pull', { name: 'a/b/c/d/e' })).status, 400);
  assert.equal((await post(srv, '/api/pull', {})).status, 400);
});

test('a pulled model can be deleted through /api/delete', async (t) => {
  if (skip) return t.skip(skip);
  await client.pull({ model: 'tiny:1b' });
  await client.delete({ model: 'tiny:1b' });
  assert.ok(!(await client.list()).models.some((m) => m.name === 'tiny:1b'));
  assert.equal((await post(srv, '/api/delete', { model: 'tiny:1b' }, 'DELETE')).status, 404);
});
