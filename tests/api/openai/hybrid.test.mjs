// hybrid.test.mjs - LFM2, the hybrid convolution + attention architecture
// (src/model/lfm2.c, recurrent state per slot), served through every dialect
// with the vendors' own SDKs: a random-weight lfm2 file carrying LFM2.5's
// real chat template (../shared/templates/LFM2.5-Instruct.jinja) chats on
// /v1/chat/completions (openai), /v1/messages (@anthropic-ai/sdk), /api/chat
// (ollama) and LM Studio's /api/v1/chat (fetch); a ten-turn conversation
// re-sends its growing history each turn and every turn must succeed; a
// forced tool call comes back parsed from LFM2's <|tool_call_start|> list.
// Random weights: the tests check that each request runs end to end through
// the family's template, parser and model, not what it says.
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

// without ../shared: the LFM2 family's default template
const TEMPLATE = sharedTemplate('LFM2.5-Instruct.jinja');
const MODEL = 'liquid/lfm2';
const CTX = 2048;
let srv, dir, skip;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-hybrid-'));
  mkdirSync(path.join(dir, 'liquid'));
  const r = await runCli(['gen-model', path.join(dir, 'liquid/lfm2.gguf'), '--arch', 'lfm2', '--vocab', LLAMA_VOCAB,
    ...templateArgs(TEMPLATE), '--ctx', String(CTX), '--name', 'LFM2.5 1.2B Instruct']);
  if (r.code !== 0) throw new Error(`gen-model lfm2 failed: ${r.stderr}`);
  srv = await startServer({ args: ['--models-dir', dir, '--parallel', '2'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const SYSTEM = 'You are a terse assistant.';
const USER = 'Name three colours.';

test('lfm2 is listed as runnable, family LFM2, with its real context length', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes(MODEL), JSON.stringify(ids));
  const show = await new Ollama({ host: srv.url }).show({ model: MODEL });
  assert.equal(show.details.family, 'lfm2');
  assert.ok(show.capabilities.includes('completion'), JSON.stringify(show.capabilities));
  assert.ok(show.capabilities.includes('tools'), JSON.stringify(show.capabilities));
  assert.equal(show.model_info['lfm2.context_length'], CTX);
  const res = await fetch(`${srv.url}/api/v1/models`);
  const lm = (await res.json()).models.find((m) => m.key === MODEL);
  assert.ok(lm, 'no lfm2 on /api/v1/models');
  assert.equal(lm.max_context_length, CTX);
});

test('lfm2: a chat completion through the openai SDK', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const r = await client.chat.completions.create({
    model: MODEL, max_tokens: 6, temperature: 0,
    messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
  });
  assert.equal(r.model, MODEL);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 5 && r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 6);
});

test('lfm2: a streamed message through the anthropic SDK', async (t) => {
  if (skip) return t.skip(skip);
  const client = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
  const stream = client.messages.stream({
    model: MODEL, max_tokens: 6, temperature: 0, system: SYSTEM, messages: [{ role: 'user', content: USER }],
  });
  const r = await stream.finalMessage();
  assert.equal(r.type, 'message');
  assert.equal(r.role, 'assistant');
  assert.ok(r.content.length >= 1);
  for (const c of r.content) assert.equal(c.type, 'text');
  assert.ok(['max_tokens', 'end_turn', 'stop_sequence'].includes(r.stop_reason), r.stop_reason);
  const prompt = r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0);
  assert.ok(prompt > 5 && r.usage.output_tokens >= 1 && r.usage.output_tokens <= 6, JSON.stringify(r.usage));
});

test('lfm2: a chat through the ollama SDK', async (t) => {
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

test("lfm2: a chat through LM Studio's /api/v1/chat", async (t) => {
  if (skip) return t.skip(skip);
  const res = await fetch(`${srv.url}/api/v1/chat`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, system_prompt: SYSTEM, input: USER, max_output_tokens: 6, temperature: 0 }),
  });
  const b = await res.json();
  assert.equal(res.status, 200, JSON.stringify(b));
  assert.equal(b.model_instance_id, MODEL);
  assert.equal(b.output.at(-1).type, 'message');
  assert.equal(typeof b.output.at(-1).content, 'string');
  assert.ok(b.stats.input_tokens > 5 && b.stats.total_output_tokens >= 1 && b.stats.total_output_tokens <= 6);
});

// Ten turns, each re-sending the whole history with the model's own answers:
// the recurrent state must follow every time. The client re-sends each
// answer edited, so the history differs from what the slot decoded right
// after the previous prompt: each turn still resumes the previous prompt
// whole, from its recurrent-state checkpoint. Greedy, so a
// turn repeated from scratch on a fresh history gives the same answer.
test('lfm2: a ten-turn conversation through the openai SDK, every turn answered', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const messages = [{ role: 'system', content: SYSTEM }];
  let last = 0;
  for (let turn = 0; turn < 10; turn++) {
    messages.push({ role: 'user', content: `Turn ${turn}: say something about the number ${turn * 7}.` });
    const r = await client.chat.completions.create({ model: MODEL, max_tokens: 8, temperature: 0, messages });
    assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason), `turn ${turn}`);
    assert.ok(r.usage.prompt_tokens > last, `turn ${turn}: prompt ${r.usage.prompt_tokens} after ${last}`);
    // the previous prompt is resumed from its checkpoint (or the live state)
    // whatever tokens the re-sent answer became
    const cached = r.usage.prompt_tokens_details?.cached_tokens ?? 0;
    if (turn > 0) assert.ok(cached >= last, `turn ${turn}: ${cached} cached of the previous ${last}`);
    last = r.usage.prompt_tokens;
    // re-sent as a client that tidies answers would: not the decoded tokens
    messages.push({ role: 'assistant', content: `${(r.choices[0].message.content ?? '').trim()} [noted]` });
  }
  // the last turn again: the same greedy answer whatever the cache held
  const again = await client.chat.completions.create({
    model: MODEL, max_tokens: 8, temperature: 0, messages: messages.slice(0, -1),
  });
  assert.equal(`${(again.choices[0].message.content ?? '').trim()} [noted]`, messages.at(-1).content);
});

test('lfm2: a forced tool call comes back parsed from its <|tool_call_start|> list', async (t) => {
  if (skip) return t.skip(skip);
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
    model: MODEL, max_tokens: 60, temperature: 0, tools, tool_choice: 'required',
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(args), ['city']);
  assert.equal(typeof args.city, 'string');
});
