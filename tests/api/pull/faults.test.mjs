// faults.test.mjs - `parley pull` when things go wrong: a registry that
// answers 404 or 500, a wrong digest, a short body, a connection dropped
// halfway, an unknown repository or quantization; and resuming a download
// whose process was killed (an HTTP Range request continues the .partial,
// and the result hashes to the source's digest). Each failure gives a clear
// error, a non-zero exit, and no model file where a model is expected.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { BIN, runCli, startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';
import { startFakeHub } from '../lib/fakehub.mjs';

let models, hub, skip;
const dirs = [];
const fresh = () => { const d = mkdtempSync(path.join(tmpdir(), 'parley-pullf-')); dirs.push(d); return d; };
const sha = (p) => createHash('sha256').update(readFileSync(p)).digest('hex');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  models = await makeModelsDir();
  if (models.skip) { skip = models.skip; return; }
  hub = await startFakeHub({ modelPath: path.join(models.dir, 'org/tiny.gguf') });
});
after(async () => {
  if (hub) await hub.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (models?.cleanup) models.cleanup();
});

// Pulls with a fault set; checks the exit status, the message and that no
// model file exists. Returns { r, dir, data }.
async function failing(name, fault, pattern) {
  const data = fresh();
  hub.fault = fault;
  let r;
  try {
    r = await runCli(['pull', name, '--data-dir', data], hub.env);
  } finally {
    hub.fault = null;
  }
  assert.equal(r.code, 1, `expected failure, got ${r.code}: ${r.stderr}`);
  assert.match(r.stderr, pattern);
  const dir = path.join(data, 'models', 'tiny@1b');
  assert.ok(!existsSync(path.join(dir, 'model.gguf')), 'no model file where a model is expected');
  const list = await runCli(['list', '--json', '--data-dir', data], { PARLEY_NO_EXTERNAL_MODELS: '1' });
  assert.deepEqual(JSON.parse(list.stdout).models.filter((m) => m.pulled), []);
  return { r, dir, data };
}

test('registry 404 on the manifest: no such model or tag', async (t) => {
  if (skip) return t.skip(skip);
  await failing('tiny:1b', { mode: '404', match: /manifests/ }, /no such model or tag.*404/);
  const unknownTag = await failing('tiny:nope', null, /tiny:nope: no such model or tag/);
  assert.ok(unknownTag);
});

test('registry 500 on a blob: the status and the URL are named', async (t) => {
  if (skip) return t.skip(skip);
  const { dir } = await failing('tiny:1b', { mode: '500' }, /model\.gguf: .*HTTP 500 for http:\/\/127\.0\.0\.1:\d+\/v2\/library\/tiny\/blobs/);
  assert.ok(!existsSync(path.join(dir, 'model.gguf.partial')), 'an empty .partial is not kept');
});

test('wrong digest: the bytes are rejected and the .partial removed', async (t) => {
  if (skip) return t.skip(skip);
  const { dir } = await failing('tiny:1b', { mode: 'digest' }, /digest mismatch.*expected sha256:[0-9a-f]{64}, got sha256:[0-9a-f]{64}/);
  assert.ok(!existsSync(path.join(dir, 'model.gguf.partial')));
});

test('a short body: truncated download', async (t) => {
  if (skip) return t.skip(skip);
  await failing('tiny:1b', { mode: 'short', after: 4096 }, /got 4096 bytes, the source says \d+ \(truncated download\)/);
});

test('connection dropped halfway: the .partial stays and the next pull resumes it', async (t) => {
  if (skip) return t.skip(skip);
  const { dir, data } = await failing('tiny:1b', { mode: 'drop', after: 1 << 20 },
    /connection dropped after 1048576 of \d+ bytes.*pull again to resume/);
  assert.equal(statSync(path.join(dir, 'model.gguf.partial')).size, 1 << 20);
  hub.requests.length = 0;
  const r = await runCli(['pull', 'tiny:1b', '--data-dir', data], hub.env);
  assert.equal(r.code, 0, r.stderr);
  const blob = hub.requests.find((q) => q.url.includes(`/blobs/sha256:${hub.modelSha}`));
  assert.equal(blob.range, `bytes=${1 << 20}-`);
  assert.equal(sha(path.join(dir, 'model.gguf')), hub.modelSha);
});

test('Hugging Face: unknown repository, unknown quantization, bad name', async (t) => {
  if (skip) return t.skip(skip);
  const data = fresh();
  const a = await runCli(['pull', 'hf.co/acme/nope', '--data-dir', data], hub.env);
  assert.equal(a.code, 1);
  assert.match(a.stderr, /hf\.co\/acme\/nope: repository not found/);
  const b = await runCli(['pull', 'hf.co/acme/tiny-GGUF:Q5_K_M', '--data-dir', data], hub.env);
  assert.equal(b.code, 1);
  assert.match(b.stderr, /no GGUF file of quantization Q5_K_M.*Q4_K_M.*Q8_0|no GGUF file of quantization Q5_K_M.*Q8_0.*Q4_K_M/);
  const c = await runCli(['pull', 'hf.co/acme/../x', '--data-dir', data], hub.env);
  assert.equal(c.code, 2);
  assert.match(c.stderr, /bad repository/);
});

test('a killed pull resumes with a Range request and the result matches the digest', async (t) => {
  if (skip) return t.skip(skip);
  const data = fresh();
  const partial = path.join(data, 'models', 'tiny@1b', 'model.gguf.partial');
  hub.fault = { mode: 'slow', chunk: 65536, delayMs: 25 };
  const proc = spawn(BIN, ['pull', 'tiny:1b', '--data-dir', data], { env: { ...process.env, ...hub.env }, stdio: 'ignore' });
  let size = 0;
  for (let i = 0; i < 600 && size < 1_000_000; i++) {
    await sleep(25);
    size = existsSync(partial) ? statSync(partial).size : 0;
  }
  proc.kill('SIGKILL');
  await new Promise((r) => proc.once('exit', r));
  hub.fault = null;
  size = statSync(partial).size;
  assert.ok(size > 0 && size < hub.modelSize, `partial has ${size} of ${hub.modelSize}`);
  hub.requests.length = 0;
  const r = await runCli(['pull', 'tiny:1b', '--data-dir', data], hub.env);
  assert.equal(r.code, 0, r.stderr);
  const blob = hub.requests.find((q) => q.url.includes(`/blobs/sha256:${hub.modelSha}`));
  assert.equal(blob.range, `bytes=${size}-`, 'continued where the killed process stopped');
  const final = path.join(data, 'models', 'tiny@1b', 'model.gguf');
  assert.equal(sha(final), hub.modelSha);
  assert.ok(!existsSync(partial));
});

test('a failing pull never disturbs a model being served', async (t) => {
  if (skip) return t.skip(skip);
  const data = fresh();
  const ok = await runCli(['pull', 'tiny:1b', '--data-dir', data], hub.env);
  assert.equal(ok.code, 0, ok.stderr);
  const md = path.join(data, 'models');
  const srv = await startServer({ args: ['--models-dir', md], env: { ...hub.env } });
  try {
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: 'tiny:1b', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 });
    assert.equal((await ask()).choices.length, 1);
    // Another process pulls into the same models dir and fails.
    hub.fault = { mode: 'digest' };
    const bad = await runCli(['pull', 'tiny:latest', '--data-dir', fresh(), '--models-dir', md], hub.env);
    hub.fault = null;
    assert.equal(bad.code, 1);
    assert.equal(sha(path.join(md, 'tiny@1b', 'model.gguf')), hub.modelSha);
    assert.equal((await ask()).choices.length, 1);
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.ok(!ids.includes('tiny:latest'), ids.join(', '));
  } finally {
    await srv.stop();
  }
});

test('a download a restart interrupted resumes when the server starts', async (t) => {
  if (skip) return t.skip(skip);
  const data = fresh();
  const partial = path.join(data, 'models', 'tiny@1b', 'model.gguf.partial');
  hub.fault = { mode: 'slow', chunk: 65536, delayMs: 25 };
  const proc = spawn(BIN, ['pull', 'tiny:1b', '--data-dir', data], { env: { ...process.env, ...hub.env }, stdio: 'ignore' });
  let size = 0;
  for (let i = 0; i < 600 && size < 500_000; i++) {
    await sleep(25);
    size = existsSync(partial) ? statSync(partial).size : 0;
  }
  proc.kill('SIGKILL');
  await new Promise((r) => proc.once('exit', r));
  hub.fault = null;
  hub.requests.length = 0;
  // The job row still says "downloading": the server picks it up at start.
  const srv = await startServer({ args: ['--data-dir', data], env: { ...hub.env } });
  try {
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    let ids = [];
    for (let i = 0; i < 100 && !ids.includes('tiny:1b'); i++) {
      await sleep(100);
      ids = [];
      for await (const m of client.models.list()) ids.push(m.id);
    }
    assert.ok(ids.includes('tiny:1b'), `resumed pull never completed: ${srv.log()}`);
    const blob = hub.requests.find((q) => q.url.includes(`/blobs/sha256:${hub.modelSha}`));
    assert.match(blob.range ?? '', /^bytes=\d+-$/);
    assert.equal(sha(path.join(data, 'models', 'tiny@1b', 'model.gguf')), hub.modelSha);
  } finally {
    await srv.stop();
  }
});

test('Hugging Face: without lfs.oid in the listing, x-linked-etag still catches a wrong digest', async (t) => {
  if (skip) return t.skip(skip);
  hub.listingWithoutLfs = true;
  try {
    const data = fresh();
    hub.fault = { mode: 'digest' };
    const bad = await runCli(['pull', 'hf.co/acme/tiny-GGUF:Q8_0', '--data-dir', data], hub.env);
    hub.fault = null;
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, new RegExp(`digest mismatch.*expected sha256:${hub.modelSha}`));
    assert.ok(!existsSync(path.join(data, 'models', 'hf.co--acme--tiny-GGUF@Q8_0', 'tiny-Q8_0.gguf')));
    const good = await runCli(['pull', 'hf.co/acme/tiny-GGUF:Q8_0', '--data-dir', data], hub.env);
    assert.equal(good.code, 0, good.stderr);
  } finally {
    hub.fault = null;
    hub.listingWithoutLfs = false;
  }
});

test('a source publishing a truncated GGUF under its own digest: the pull fails at verifying', async (t) => {
  if (skip) return t.skip(skip);
  const { writeFileSync } = await import('node:fs');
  const data = fresh();
  const cut = path.join(data, 'cut.gguf');
  writeFileSync(cut, readFileSync(path.join(models.dir, 'org/tiny.gguf')).subarray(0, 200_000));
  const bad = await startFakeHub({ modelPath: cut });
  try {
    const r = await runCli(['pull', 'tiny:1b', '--data-dir', data], bad.env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /tiny:1b: model\.gguf is not a usable GGUF file/);
    const dir = path.join(data, 'models', 'tiny@1b');
    assert.ok(!existsSync(path.join(dir, 'model.gguf')));
    assert.ok(!existsSync(path.join(dir, 'model.gguf.partial')), 'a verified but corrupt file is not kept');
  } finally {
    await bad.stop();
  }
});

test('Hugging Face mirror without the tree endpoint: the model info listing is used', async (t) => {
  if (skip) return t.skip(skip);
  hub.noTree = true;
  hub.requests.length = 0;
  try {
    const data = fresh();
    const r = await runCli(['pull', 'hf.co/acme/tiny-GGUF:Q4_K_M', '--data-dir', data], hub.env);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(hub.requests.some((q) => q.url === '/api/models/acme/tiny-GGUF?blobs=true'), JSON.stringify(hub.requests));
    assert.equal(sha(path.join(data, 'models', 'hf.co--acme--tiny-GGUF@Q4_K_M', 'tiny-Q4_K_M.gguf')), hub.modelSha);
  } finally {
    hub.noTree = false;
  }
});
