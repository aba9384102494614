// tools_generic.test.mjs - tools on a model whose template shows none: a
// random-weight llama with no chat template in its file, so it gets the
// Llama 2 family default, which renders no tools. parley adds the generic
// (Hermes) tool prompt instead of dropping the tools, and a forced choice
// yields a parsed call, through the official `openai` SDK (Chat Completions
// and Responses) and `@anthropic-ai/sdk` (tool_choice any/tool).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB } from '../lib/models.mjs';

const MODEL = 'org/llama2';
let srv, oa, an, dir, skip;

before(async () => {
  if (!existsSync(LLAMA_VOCAB)) { skip = `shared vocabulary not found at ${LLAMA_VOCAB}`; return; }
  dir = mkdtempSync(path.join(tmpdir(), 'parley-generic-'));
  mkdirSync(path.join(dir, 'org'));
  const r = await runCli(['gen-model', path.join(dir, 'org/llama2.gguf'), '--vocab', LLAMA_VOCAB, '--ctx', '2048']);
  if (r.code !== 0) throw new Error(`gen-model failed: ${r.stderr}`);
  srv = await startServer({ args: ['--models-dir', dir, '--parallel', '2'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  oa = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
  an = new Anthropic({ baseURL: srv.url, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const weather = { type: 'function', function: { name: 'get_weather', description: 'Current weather',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false } } };
const messages = [{ role: 'user', content: 'Weather in Oslo?' }];

test('the tools reach the prompt (not silently dropped)', async (t) => {
  if (skip) return t.skip(skip);
  const bare = await oa.chat.completions.create({ model: MODEL, messages, max_tokens: 1 });
  const tooled = await oa.chat.completions.create({ model: MODEL, messages, tools: [weather], max_tokens: 1 });
  assert.ok(tooled.usage.prompt_tokens > bare.usage.prompt_tokens + 100,
    `${tooled.usage.prompt_tokens} prompt tokens with tools, ${bare.usage.prompt_tokens} without`);
});

test('chat completions: "required" and a named function yield a parsed call, streamed or not', async (t) => {
  if (skip) return t.skip(skip);
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const r = await oa.chat.completions.create({ model: MODEL, messages, tools: [weather], tool_choice, max_tokens: 120 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    assert.equal(typeof JSON.parse(c.message.tool_calls[0].function.arguments).city, 'string');
  }
  const s = await oa.chat.completions.create({ model: MODEL, messages, tools: [weather], tool_choice: 'required', max_tokens: 120, stream: true });
  let args = '', finish = null, name = null;
  for await (const ch of s) {
    const d = ch.choices[0]?.delta;
    for (const tc of d?.tool_calls ?? []) { if (tc.function?.name) name = tc.function.name; args += tc.function?.arguments ?? ''; }
    if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(name, 'get_weather');
  assert.equal(typeof JSON.parse(args).city, 'string');
});

test('responses: tool_choice "required" gives a function_call item', async (t) => {
  if (skip) return t.skip(skip);
  const tools = [{ type: 'function', name: 'get_weather', parameters: weather.function.parameters }];
  const r = await oa.responses.create({ model: MODEL, input: 'Weather in Oslo?', tools, tool_choice: 'required', max_output_tokens: 120 });
  const call = r.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.arguments).city, 'string');
});

test('anthropic messages: tool_choice any and tool give a tool_use block', async (t) => {
  if (skip) return t.skip(skip);
  const tools = [{ name: 'get_weather', description: 'Current weather', input_schema: weather.function.parameters }];
  for (const tool_choice of [{ type: 'any' }, { type: 'tool', name: 'get_weather' }]) {
    const m = await an.messages.create({ model: MODEL, max_tokens: 120, tools, tool_choice, messages });
    assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m.content));
    const use = m.content.find((b) => b.type === 'tool_use');
    assert.equal(use.name, 'get_weather');
    assert.equal(typeof use.input.city, 'string');
  }
});
