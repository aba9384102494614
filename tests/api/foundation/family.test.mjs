// family.test.mjs - the detected model family over HTTP, where each dialect
// has room (Ollama /api/show details.families and model_info, LM Studio
// /api/v0/models, OpenAI /v1/models/{id}): a Voxtral Realtime file of
// architecture llama is told apart from a plain Llama by its family.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB } from '../lib/models.mjs';

let srv, dir, skip;
before(async () => {
  if (!existsSync(LLAMA_VOCAB)) { skip = `shared vocabulary not found at ${LLAMA_VOCAB}`; return; }
  dir = mkdtempSync(path.join(tmpdir(), 'parley-family-'));
  mkdirSync(path.join(dir, 'org'));
  const r = await runCli(['gen-model', path.join(dir, 'org/vox.gguf'), '--vocab', LLAMA_VOCAB,
    '--name', 'Voxtral Mini 4B Realtime 2602']);
  if (r.code !== 0) throw new Error(`gen-model failed: ${r.stderr}`);
  srv = await startServer({ args: ['--models-dir', dir], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the family of a Voxtral Realtime file (architecture llama) in every dialect', async (t) => {
  if (skip) return t.skip(skip);
  const show = await new Ollama({ host: srv.url }).show({ model: 'org/vox' });
  assert.equal(show.details.family, 'llama');
  assert.deepEqual(show.details.families, ['llama', 'voxtral-realtime']);
  assert.equal(show.model_info['parley.family'], 'voxtral-realtime');
  assert.equal(show.model_info['parley.family_display'], 'Voxtral Realtime');
  const v0 = await (await fetch(`${srv.url}/api/v0/models`)).json();
  const e = v0.data.find((m) => m.id === 'org/vox');
  assert.equal(e.arch, 'llama');
  assert.equal(e.family, 'voxtral-realtime');
  assert.equal(e.family_display, 'Voxtral Realtime');
  const v1 = await (await fetch(`${srv.url}/api/v1/models`)).json();
  assert.equal(v1.models.find((m) => m.key === 'org/vox').family, 'voxtral-realtime');
  const m = await new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'k', maxRetries: 0 }).models.retrieve('org/vox');
  assert.equal(m.family, 'voxtral-realtime');
  assert.equal(m.family_display, 'Voxtral Realtime');
  assert.equal(m.architecture, 'llama');
});
