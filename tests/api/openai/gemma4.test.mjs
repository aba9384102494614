// gemma4.test.mjs - a gemma4 model (src/model/gemma4.c: sliding and full
// layers of two head widths, shared KV layers, per-layer embeddings) with
// Gemma 4's real chat template (../shared/templates) served through
// /v1/chat/completions with the official `openai` SDK: listed, a chat
// request rendered by that template gets a completion, streamed and not,
// and the two agree at temperature 0. The weights are random: the tests
// check that generation runs end to end, not what the text says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB, SHARED } from '../lib/models.mjs';

const MODEL = 'google/gemma4';
const TEMPLATE = path.join(SHARED, 'templates', 'google-gemma-4-31B-it-interleaved.jinja');
let srv, client, dir, skip;

before(async () => {
  if (!existsSync(LLAMA_VOCAB) || !existsSync(TEMPLATE)) { skip = `shared vocabulary or template missing`; return; }
  dir = mkdtempSync(path.join(os.tmpdir(), 'parley-gemma4-'));
  mkdirSync(path.join(dir, 'google'));
  const g = await runCli(['gen-model', path.join(dir, 'google/gemma4.gguf'), '--arch', 'gemma4', '--vocab', LLAMA_VOCAB,
    '--chat-template', TEMPLATE, '--ctx', '512']);
  assert.equal(g.code, 0, `gen-model --arch gemma4 failed: ${g.stderr}`);
  srv = await startServer({
    args: ['--models-dir', dir, '--default-model', MODEL],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// Longer than the 8-position window once templated.
const messages = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Tell me three things about the moon, in one short line each.' },
];

test('the gemma4 model is listed', async (t) => {
  if (skip) return t.skip(skip);
  const list = [];
  for await (const m of client.models.list()) list.push(m.id);
  assert.ok(list.includes(MODEL), `no ${MODEL} in ${JSON.stringify(list)}`);
});

test('a chat completion from gemma4 with its template, streamed and not, agrees at temperature 0', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, MODEL);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['length', 'stop'].includes(c.finish_reason), c.finish_reason);
  assert.ok(r.usage.prompt_tokens > 8, `prompt of ${r.usage.prompt_tokens} tokens`);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);

  const stream = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 12, temperature: 0, stream: true,
  });
  let text = '';
  let finish = null;
  for await (const ch of stream) {
    for (const d of ch.choices) {
      if (d.delta?.content) text += d.delta.content;
      if (d.finish_reason) finish = d.finish_reason;
    }
  }
  assert.equal(text, c.message.content);
  assert.equal(finish, c.finish_reason);
});
