// download.test.mjs - POST /api/v1/models/download and its status routes
// (spec ../shared/specs/lmstudio.md sections 2.6/2.7, checks 25 and 26) on
// the puller, against the loopback fake Hugging Face hub (lib/fakehub.mjs)
// serving a generated model: a catalog id OWNER/REPO with a quantization
// becomes a job that completes, the model then lists, a second download is
// already_downloaded, and a repository the hub does not have fails.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';
import { startFakeHub } from '../lib/fakehub.mjs';
import { client, assertError } from './lib.mjs';

let models, hub, srv, c, skip;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

before(async () => {
  models = await makeModelsDir();
  if (models.skip) { skip = models.skip; return; }
  hub = await startFakeHub({ modelPath: path.join(models.dir, 'org/tiny.gguf') });
  srv = await startServer({ args: ['--models-dir', models.dir], env: hub.env });
  c = client(srv.url);
});
after(async () => {
  if (srv) await srv.stop();
  if (hub) await hub.stop();
  if (models?.cleanup) models.cleanup();
});

// Polls a job until it is final (or 20 s pass).
async function settle(prefix, id) {
  let j;
  for (let i = 0; i < 200; i++) {
    const r = await c.get(`${prefix}/models/download/status/${id}`);
    assert.equal(r.status, 200, r.text);
    j = r.json;
    assert.equal(j.job_id, id);
    assert.ok(['downloading', 'paused', 'completed', 'failed'].includes(j.status), j.status);
    if (j.status === 'downloading') {
      assert.equal(typeof j.bytes_per_second, 'number');
      assert.ok(j.downloaded_bytes <= j.total_size_bytes || j.total_size_bytes === 0);
    }
    if (j.status === 'completed' || j.status === 'failed') return j;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`job ${id} did not finish: ${JSON.stringify(j)}`);
}

test('25+26. a new model: job_id, downloading, size, ISO start; status until completed; then it lists', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.post('/api/v1/models/download', { model: 'acme/tiny-GGUF', quantization: 'Q8_0' });
  assert.equal(r.status, 200, r.text);
  assert.match(r.json.job_id, /\S/);
  assert.ok(['downloading', 'completed'].includes(r.json.status), r.text);
  assert.match(r.json.started_at, ISO);
  assert.equal(r.json.total_size_bytes, hub.modelSize);
  const done = await settle('/api/v1', r.json.job_id);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.match(done.completed_at, ISO);
  assert.equal(done.downloaded_bytes, done.total_size_bytes);
  // the same job through the alias, and in the bare listing
  assert.equal((await c.get(`/lmstudio/v1/models/download/status/${r.json.job_id}`)).json.status, 'completed');
  const all = await c.get('/api/v1/models/download/status');
  assert.ok(all.json.jobs.some((j) => j.job_id === r.json.job_id));
  const listed = (await c.get('/api/v1/models')).json.models.map((m) => m.key);
  assert.ok(listed.includes('hf.co/acme/tiny-GGUF:Q8_0'), listed.join(', '));
  // downloading it again: already there, no job
  for (const body of [{ model: 'acme/tiny-GGUF', quantization: 'Q8_0' }, { model: 'hf.co/acme/tiny-GGUF:Q8_0' }]) {
    const again = await c.post('/lmstudio/v1/models/download', body);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.json, { status: 'already_downloaded' });
  }
  // and it chats
  const ch = await c.post('/api/v1/chat', { model: 'hf.co/acme/tiny-GGUF:Q8_0', input: 'hi', max_output_tokens: 2 });
  assert.equal(ch.status, 200, ch.text);
});

test('26. a repository the hub does not have: the job fails with an error; unknown job ids are job_not_found', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.post('/api/v1/models/download', { model: 'acme/missing-GGUF' });
  assert.equal(r.status, 200, r.text);
  const done = await settle('/lmstudio/v1', r.json.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(typeof done.error, 'string');
  assertError(await c.get('/api/v1/models/download/status/job_nope'), 404, { type: 'job_not_found' });
  assertError(await c.post('/api/v1/models/download', { model: '' }), 400, { param: 'model' });
  assertError(await c.post('/api/v1/models/download', { model: 'x', quantization: 4 }), 400, { param: 'quantization' });
});
