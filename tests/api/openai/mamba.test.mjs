// mamba.test.mjs - the Mamba-2 architectures (src/model/mamba2.c: per-slot
// convolution and scan state) served through every dialect with the
// vendors' own SDKs: random-weight granitehybrid (with experts, Granite
// 4.1's real template), nemotron_h (Nemotron 3 Nano's real template) and
// mamba2 (no template: the family's ChatML default) files each chat on
// /v1/chat/completions (openai), /v1/messages (@anthropic-ai/sdk),
// /api/chat (ollama) and LM Studio's /api/v1/chat (fetch), listed as
// runnable with the context length they report; a
// five-turn conversation re-sends its history and resumes it from the
// slot's state checkpoint. Random weights: the tests check that each
// request runs end to end, not what it says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB, sharedTemplate, templateArgs } from '../lib/models.mjs';

const CTX = 1024;
// without ../shared: the families' default templates
const MODELS = [
  { id: 'ibm/granite-4-h', arch: 'granitehybrid', shape: 'small-moe',
    template: sharedTemplate('ibm-granite-granite-4.1.jinja') },
  { id: 'nvidia/nemotron-h', arch: 'nemotron_h', shape: 'small',
    template: sharedTemplate('NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja') },
  { id: 'state-spaces/mamba2', arch: 'mamba2', shape: 'small' },
];
let srv, dir, skip;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-mamba-'));
  for (const m of MODELS) {
    const [org] = m.id.split('/');
    mkdirSync(path.join(dir, org), { recursive: true });
    const args = ['gen-model', path.join(dir, `${m.id}.gguf`), '--arch', m.arch, '--shape', m.shape, '--vocab',
      LLAMA_VOCAB, '--ctx', String(CTX)];
    args.push(...templateArgs(m.template));
    const r = await runCli(args);
    if (r.code !== 0) throw new Error(`gen-model ${m.arch} failed: ${r.stderr}`);
  }
  srv = await startServer({ args: ['--models-dir', dir, '--parallel', '2'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const SYSTEM = 'You are a terse assistant.';
const USER = 'Name three colours.';

for (const M of MODELS) {
  test(`${M.arch} is listed as runnable with its context length`, async (t) => {
    if (skip) return t.skip(skip);
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.ok(ids.includes(M.id), JSON.stringify(ids));
    const show = await new Ollama({ host: srv.url }).show({ model: M.id });
    assert.equal(show.details.family, M.arch); // Ollama's family is the architecture
    assert.ok(show.capabilities.includes('completion'), JSON.stringify(show.capabilities));
    assert.equal(show.model_info[`${M.arch}.context_length`], CTX);
    const res = await fetch(`${srv.url}/api/v1/models`);
    const lm = (await res.json()).models.find((m) => m.key === M.id);
    assert.ok(lm, `no ${M.id} on /api/v1/models`);
    assert.equal(lm.max_context_length, CTX);
  });

  test(`${M.arch}: a chat completion through the openai SDK`, async (t) => {
    if (skip) return t.skip(skip);
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: M.id, max_tokens: 6, temperature: 0,
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(r.model, M.id);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 5 && r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 6);
  });

  test(`${M.arch}: a streamed message through the anthropic SDK`, async (t) => {
    if (skip) return t.skip(skip);
    const client = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
    const stream = client.messages.stream({
      model: M.id, max_tokens: 6, temperature: 0, system: SYSTEM, messages: [{ role: 'user', content: USER }],
    });
    const r = await stream.finalMessage();
    assert.equal(r.type, 'message');
    assert.equal(r.role, 'assistant');
    assert.ok(['max_tokens', 'end_turn', 'stop_sequence'].includes(r.stop_reason), r.stop_reason);
    const prompt = r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0);
    assert.ok(prompt > 5 && r.usage.output_tokens >= 1 && r.usage.output_tokens <= 6, JSON.stringify(r.usage));
  });

  test(`${M.arch}: a chat through the ollama SDK`, async (t) => {
    if (skip) return t.skip(skip);
    const r = await new Ollama({ host: srv.url }).chat({
      model: M.id, options: { num_predict: 6, temperature: 0 },
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(r.model, M.id);
    assert.equal(r.message.role, 'assistant');
    assert.equal(r.done, true);
    assert.ok(r.prompt_eval_count > 5 && r.eval_count >= 1 && r.eval_count <= 6);
  });

  test(`${M.arch}: a chat through LM Studio's /api/v1/chat`, async (t) => {
    if (skip) return t.skip(skip);
    const res = await fetch(`${srv.url}/api/v1/chat`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: M.id, system_prompt: SYSTEM, input: USER, max_output_tokens: 6, temperature: 0 }),
    });
    const b = await res.json();
    assert.equal(res.status, 200, JSON.stringify(b));
    assert.equal(b.model_instance_id, M.id);
    assert.equal(b.output.at(-1).type, 'message');
    assert.ok(b.stats.input_tokens > 5 && b.stats.total_output_tokens >= 1 && b.stats.total_output_tokens <= 6);
  });
}

// Five turns re-sending the history with edited answers: each turn resumes
// the previous prompt from its checkpoint (cached_tokens), and the last turn
// asked again gives the same greedy answer.
test('granitehybrid: a five-turn conversation resumes each turn from its checkpoint', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const model = MODELS[0].id;
  const messages = [{ role: 'system', content: SYSTEM }];
  let last = 0;
  for (let turn = 0; turn < 5; turn++) {
    messages.push({ role: 'user', content: `Turn ${turn}: say something about the number ${turn * 7}.` });
    const r = await client.chat.completions.create({ model, max_tokens: 8, temperature: 0, messages });
    assert.ok(r.usage.prompt_tokens > last, `turn ${turn}: prompt ${r.usage.prompt_tokens} after ${last}`);
    const cached = r.usage.prompt_tokens_details?.cached_tokens ?? 0;
    if (turn > 0) assert.ok(cached >= last, `turn ${turn}: ${cached} cached of the previous ${last}`);
    last = r.usage.prompt_tokens;
    messages.push({ role: 'assistant', content: `${(r.choices[0].message.content ?? '').trim()} [noted]` });
  }
  const again = await client.chat.completions.create({
    model, max_tokens: 8, temperature: 0, messages: messages.slice(0, -1),
  });
  assert.equal(`${(again.choices[0].message.content ?? '').trim()} [noted]`, messages.at(-1).content);
});
