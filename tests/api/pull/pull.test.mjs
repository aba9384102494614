// pull.test.mjs - `parley pull` from a loopback fake Hugging Face hub and
// Ollama registry (lib/fakehub.mjs) serving a generated model; the pulled
// models then appear in `parley list`, in GET /v1/models and answer a chat
// through the official openai SDK; DELETE /v1/models/{id} and `parley rm`
// remove only models parley pulled (issue 5, items 4 and 5).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, runCli } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';
import { startFakeHub } from '../lib/fakehub.mjs';

let models, hub, data, skip;
const sha = (p) => createHash('sha256').update(readFileSync(p)).digest('hex');

before(async () => {
  models = await makeModelsDir();
  if (models.skip) { skip = models.skip; return; }
  hub = await startFakeHub({ modelPath: path.join(models.dir, 'org/tiny.gguf') });
  data = mkdtempSync(path.join(tmpdir(), 'parley-pull-'));
});
after(async () => {
  if (hub) await hub.stop();
  if (data) rmSync(data, { recursive: true, force: true });
  if (models?.cleanup) models.cleanup();
});

const pull = (name, ...extra) => runCli(['pull', name, '--data-dir', data, ...extra], hub.env);
const modelsDir = () => path.join(data, 'models');

test('pull from the Ollama registry by name: manifest, verified blobs, one folder', async (t) => {
  if (skip) return t.skip(skip);
  hub.requests.length = 0;
  const r = await pull('tiny:1b');
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'tiny:1b');
  assert.match(r.stderr, /success: tiny:1b/);
  const dir = path.join(modelsDir(), 'tiny@1b');
  assert.equal(sha(path.join(dir, 'model.gguf')), hub.modelSha);
  assert.ok(existsSync(path.join(dir, 'template')));
  assert.ok(!readdirSync(dir).some((f) => f.endsWith('.partial')), 'no .partial left behind');
  const urls = hub.requests.map((q) => q.url);
  assert.ok(urls.includes('/v2/library/tiny/manifests/1b'), urls.join('\n'));
  assert.ok(urls.includes(`/v2/library/tiny/blobs/sha256:${hub.modelSha}`));
});

test('pull from the Hugging Face hub: hf.co/OWNER/REPO:QUANT and OWNER/REPO --file PATTERN', async (t) => {
  if (skip) return t.skip(skip);
  hub.requests.length = 0;
  const a = await pull('hf.co/acme/tiny-GGUF:Q8_0');
  assert.equal(a.code, 0, a.stderr);
  assert.equal(a.stdout.trim(), 'hf.co/acme/tiny-GGUF:Q8_0');
  const urls = hub.requests.map((q) => q.url);
  assert.ok(urls.some((u) => u.startsWith('/api/models/acme/tiny-GGUF/tree/main')), urls.join('\n'));
  assert.ok(urls.includes('/acme/tiny-GGUF/resolve/main/tiny-Q8_0.gguf'));
  assert.ok(urls.some((u) => u.startsWith('/cdn/')), 'followed the redirect to the CDN');

  const b = await pull('acme/tiny-GGUF', '--file', '*Q4_K_M.gguf');
  assert.equal(b.code, 0, b.stderr);
  assert.equal(b.stdout.trim(), 'hf.co/acme/tiny-GGUF:Q4_K_M');
  const f = path.join(modelsDir(), 'hf.co--acme--tiny-GGUF@Q4_K_M', 'tiny-Q4_K_M.gguf');
  assert.equal(sha(f), hub.modelSha);
});

test('pulling again finds the files in place and downloads nothing', async (t) => {
  if (skip) return t.skip(skip);
  hub.requests.length = 0;
  const r = await pull('tiny:1b');
  assert.equal(r.code, 0, r.stderr);
  assert.ok(!hub.requests.some((q) => q.url.includes('/blobs/')), JSON.stringify(hub.requests));
  // OWNER/REPO with --quant is the same Hugging Face model, already in place.
  const q = await pull('acme/tiny-GGUF', '--quant', 'Q8_0');
  assert.equal(q.code, 0, q.stderr);
  assert.equal(q.stdout.trim(), 'hf.co/acme/tiny-GGUF:Q8_0');
  assert.ok(!hub.requests.some((x) => x.url.startsWith('/cdn/')), 'nothing downloaded again');
});

test('parley list shows the pulled models under the names they were pulled by', async (t) => {
  if (skip) return t.skip(skip);
  const r = await runCli(['list', '--json', '--data-dir', data], { PARLEY_NO_EXTERNAL_MODELS: '1' });
  assert.equal(r.code, 0, r.stderr);
  const list = JSON.parse(r.stdout).models;
  for (const name of ['tiny:1b', 'hf.co/acme/tiny-GGUF:Q8_0', 'hf.co/acme/tiny-GGUF:Q4_K_M']) {
    const m = list.find((x) => x.name === name);
    assert.ok(m, `${name} missing from ${r.stdout}`);
    assert.equal(m.pulled, true);
    assert.equal(m.source, 'parley');
    assert.equal(m.error ?? null, null);
  }
  const o = list.find((x) => x.name === 'tiny:1b');
  assert.equal(o.digest, `sha256:${hub.modelSha}`);
  const table = await runCli(['list', '--data-dir', data], { PARLEY_NO_EXTERNAL_MODELS: '1' });
  assert.match(table.stdout, /tiny:1b\s.*pulled/);
});

test('the server lists pulled models, chats with them, and DELETE removes only pulled ones', async (t) => {
  if (skip) return t.skip(skip);
  // A file placed in the models dir by hand: listed, never deletable.
  copyFileSync(path.join(models.dir, 'org/tiny.gguf'), path.join(modelsDir(), 'hand.gguf'));
  const srv = await startServer({ args: ['--models-dir', modelsDir()], env: { ...hub.env } });
  try {
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    for (const id of ['tiny:1b', 'hf.co/acme/tiny-GGUF:Q8_0', 'hand']) assert.ok(ids.includes(id), ids.join(', '));

    for (const model of ['tiny:1b', 'hf.co/acme/tiny-GGUF:Q8_0']) {
      const c = await client.chat.completions.create({
        model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0,
      });
      assert.equal(c.object, 'chat.completion');
      assert.equal(typeof c.choices[0].message.content, 'string');
      assert.ok(c.usage.completion_tokens > 0);
    }

    const del = await client.models.delete('hf.co/acme/tiny-GGUF:Q8_0');
    assert.deepEqual(del, { id: 'hf.co/acme/tiny-GGUF:Q8_0', object: 'model', deleted: true });
    assert.ok(!existsSync(path.join(modelsDir(), 'hf.co--acme--tiny-GGUF@Q8_0')));
    await assert.rejects(client.models.retrieve('hf.co/acme/tiny-GGUF:Q8_0'), (e) => e.status === 404);

    await assert.rejects(client.models.delete('hand'), (e) => {
      assert.equal(e.status, 403);
      assert.match(e.error.message, /not downloaded by parley/);
      return true;
    });
    assert.ok(existsSync(path.join(modelsDir(), 'hand.gguf')), 'a hand-placed file is never deleted');
    await assert.rejects(client.models.delete('no-such-model'), (e) => {
      assert.equal(e.status, 404);
      assert.equal(e.code, 'model_not_found');
      return true;
    });
    // The model still loaded answers; the others are untouched.
    const c = await client.chat.completions.create({
      model: 'tiny:1b', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2,
    });
    assert.equal(c.choices.length, 1);
  } finally {
    await srv.stop();
  }
});

test('parley rm removes a pulled model and refuses other files', async (t) => {
  if (skip) return t.skip(skip);
  const env = { PARLEY_NO_EXTERNAL_MODELS: '1' };
  const hand = await runCli(['rm', 'hand', '--data-dir', data], env);
  assert.equal(hand.code, 1);
  assert.match(hand.stderr, /not downloaded by parley/);
  assert.ok(existsSync(path.join(modelsDir(), 'hand.gguf')));

  const none = await runCli(['rm', 'nothing:here', '--data-dir', data], env);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /not found/);

  const ok = await runCli(['rm', 'tiny:1b', '--data-dir', data], env);
  assert.equal(ok.code, 0, ok.stderr);
  assert.ok(!existsSync(path.join(modelsDir(), 'tiny@1b')));
  const list = JSON.parse((await runCli(['list', '--json', '--data-dir', data], env)).stdout).models;
  assert.ok(!list.some((m) => m.name === 'tiny:1b'));
  assert.ok(list.some((m) => m.name === 'hf.co/acme/tiny-GGUF:Q4_K_M'), 'other pulled models stay');
});
