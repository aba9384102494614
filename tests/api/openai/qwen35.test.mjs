// qwen35.test.mjs - the Qwen3.5 / Qwen3-Next hybrids (src/model/qwen35.c:
// gated delta-net layers with per-slot recurrent state, gated attention)
// served through every dialect with the vendors' own SDKs: random-weight
// qwen35, qwen35moe and qwen3next files carrying Qwen3.5's real chat template
// (../shared/templates/Qwen3.5-4B.jinja, which opens <think> in the
// generation prompt) chat on /v1/chat/completions (openai), /v1/messages
// (@anthropic-ai/sdk), /api/chat (ollama) and LM Studio's /api/v1/chat
// (fetch); a multi-turn conversation resumes each turn from the previous
// prompt's state; a forced tool call comes back parsed. Random weights: the
// tests check that each request runs end to end through the family's
// template, parser and model, not what it says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB, sharedTemplate, templateArgs, noTemplate } from '../lib/models.mjs';

// without ../shared: the Qwen3.5 family's default template
const TEMPLATE = sharedTemplate('Qwen3.5-4B.jinja');
const ARCHS = ['qwen35', 'qwen35moe', 'qwen3next'];
const MODEL = 'qwen/qwen35';
const CTX = 2048;
let srv, dir, skip;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-qwen35-'));
  mkdirSync(path.join(dir, 'qwen'));
  for (const a of ARCHS) {
    const r = await runCli(['gen-model', path.join(dir, `qwen/${a}.gguf`), '--arch', a, '--vocab', LLAMA_VOCAB,
      ...templateArgs(TEMPLATE), '--ctx', String(CTX), '--name', a === 'qwen3next' ? 'Qwen3 Next' : 'Qwen3.5 4B']);
    if (r.code !== 0) throw new Error(`gen-model ${a} failed: ${r.stderr}`);
  }
  srv = await startServer({ args: ['--models-dir', dir, '--parallel', '2'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const SYSTEM = 'You are a terse assistant.';
const USER = 'Name three colours.';

test('the three rows are listed as runnable, family qwen3.5, with their context length', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  for (const a of ARCHS) {
    assert.ok(ids.includes(`qwen/${a}`), JSON.stringify(ids));
    const show = await new Ollama({ host: srv.url }).show({ model: `qwen/${a}` });
    assert.equal(show.details.family, a);
    assert.ok(show.capabilities.includes('completion'), JSON.stringify(show.capabilities));
    assert.ok(show.capabilities.includes('tools'), JSON.stringify(show.capabilities));
    assert.ok(show.capabilities.includes('thinking'), JSON.stringify(show.capabilities));
    assert.equal(show.model_info[`${a}.context_length`], CTX);
  }
});

for (const a of ARCHS) {
  test(`${a}: a chat completion through the openai SDK (the answer starts in reasoning)`, async (t) => {
    if (skip) return t.skip(skip);
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: `qwen/${a}`, max_tokens: 6, temperature: 0,
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(r.model, `qwen/${a}`);
    assert.equal(r.choices[0].message.role, 'assistant');
    const m = r.choices[0].message;
    assert.ok(typeof m.reasoning_content === 'string' || typeof m.content === 'string', JSON.stringify(m));
    assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 5 && r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 6);
  });
}

test('qwen35: a streamed message through the anthropic SDK', async (t) => {
  if (skip) return t.skip(skip);
  const client = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
  const stream = client.messages.stream({
    model: MODEL, max_tokens: 6, temperature: 0, system: SYSTEM, messages: [{ role: 'user', content: USER }],
  });
  const r = await stream.finalMessage();
  assert.equal(r.type, 'message');
  assert.equal(r.role, 'assistant');
  for (const c of r.content) assert.ok(['text', 'thinking'].includes(c.type), c.type);
  assert.ok(['max_tokens', 'end_turn', 'stop_sequence'].includes(r.stop_reason), r.stop_reason);
  const prompt = r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0);
  assert.ok(prompt > 5 && r.usage.output_tokens >= 1 && r.usage.output_tokens <= 6, JSON.stringify(r.usage));
});

test('qwen35: a chat through the ollama SDK', async (t) => {
  if (skip) return t.skip(skip);
  const r = await new Ollama({ host: srv.url }).chat({
    model: MODEL, options: { num_predict: 6, temperature: 0 },
    messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
  });
  assert.equal(r.model, MODEL);
  assert.equal(r.message.role, 'assistant');
  assert.equal(typeof r.message.content, 'string');
  assert.equal(r.done, true);
  assert.ok(r.prompt_eval_count > 5 && r.eval_count >= 1 && r.eval_count <= 6);
});

test("qwen35: a chat through LM Studio's /api/v1/chat", async (t) => {
  if (skip) return t.skip(skip);
  const res = await fetch(`${srv.url}/api/v1/chat`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, system_prompt: SYSTEM, input: USER, max_output_tokens: 6, temperature: 0 }),
  });
  const b = await res.json();
  assert.equal(res.status, 200, JSON.stringify(b));
  assert.equal(b.model_instance_id, MODEL);
  assert.ok(b.stats.input_tokens > 5 && b.stats.total_output_tokens >= 1 && b.stats.total_output_tokens <= 6);
});

// Four turns re-sending the history (thinking switched off so the answer is
// re-sent as content): every turn is answered from a state that matches its
// prompt - the last turn asked again, whatever the slot's cache held, gives
// the same greedy answer. Qwen3.5's template renders an earlier answer
// without the empty <think></think> block its generation prompt had, so the
// re-sent history leaves the previous prompt a few tokens before its end,
// where no checkpoint is: the cached count is printed, not asserted.
test('qwen35: a four-turn conversation, every turn answered from the right state', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const messages = [{ role: 'system', content: SYSTEM }];
  const kw = { chat_template_kwargs: { enable_thinking: false } };
  let last = 0;
  for (let turn = 0; turn < 4; turn++) {
    messages.push({ role: 'user', content: `Turn ${turn}: say something about ${turn * 7}.` });
    const r = await client.chat.completions.create({ model: MODEL, max_tokens: 8, temperature: 0, messages, ...kw });
    assert.ok(r.usage.prompt_tokens > last, `turn ${turn}: prompt ${r.usage.prompt_tokens} after ${last}`);
    const cached = r.usage.prompt_tokens_details?.cached_tokens ?? 0;
    t.diagnostic(`turn ${turn}: prompt ${r.usage.prompt_tokens}, ${cached} cached`);
    last = r.usage.prompt_tokens;
    messages.push({ role: 'assistant', content: `${(r.choices[0].message.content ?? '').trim()} [noted]` });
  }
  const again = await client.chat.completions.create({
    model: MODEL, max_tokens: 8, temperature: 0, messages: messages.slice(0, -1), ...kw,
  });
  assert.equal(`${(again.choices[0].message.content ?? '').trim()} [noted]`, messages.at(-1).content);
});

test('qwen3next: a forced tool call comes back parsed', async (t) => {
  if (skip) return t.skip(skip);
  // the real template's XML call form: the default's Hermes JSON lets the
  // random model spend the 60 tokens on whitespace
  if (!TEMPLATE) return t.skip(noTemplate('Qwen3.5-4B.jinja'));
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'Current weather',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'],
        additionalProperties: false },
    },
  }];
  const r = await client.chat.completions.create({
    model: 'qwen/qwen3next', max_tokens: 400, temperature: 0, tools, tool_choice: 'required',
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(args), ['city']);
  assert.equal(typeof args.city, 'string');
});
