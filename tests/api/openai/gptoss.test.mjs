// gptoss.test.mjs - a gpt-oss file (src/model/gptoss.c: experts, attention
// sinks, sliding layers, YaRN) served through every dialect with the
// vendors' own SDKs. The random-weight file carries no chat template, so
// the gpt-oss family's default, harmony (src/tmpl/default_templates.c),
// renders the prompt, and the harmony parser reads the output. What can be
// checked with random weights: the family and its capabilities are
// reported (tools, thinking, reasoning levels on LM Studio), each dialect's
// way of asking for a reasoning level is accepted (OpenAI reasoning_effort,
// Anthropic thinking and output_config.effort, Ollama think levels, LM
// Studio reasoning) and a level the model cannot take is refused, and a
// forced tool call comes back as a parsed call through OpenAI and
// Anthropic (the grammar makes the model write harmony's call syntax).
// That a level reaches the prompt is seen through the prefix cache here and
// checked word for word in tests/unit/test_gen_chat.c
// (gen_render_reasoning_effort).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB } from '../lib/models.mjs';

const MODEL = 'oss/gpt-oss';
let srv, dir, skip;

before(async () => {
  if (!existsSync(LLAMA_VOCAB)) { skip = `shared vocabulary not found at ${LLAMA_VOCAB}`; return; }
  dir = mkdtempSync(path.join(tmpdir(), 'parley-gptoss-'));
  mkdirSync(path.join(dir, 'oss'));
  const r = await runCli(['gen-model', path.join(dir, 'oss/gpt-oss.gguf'), '--arch', 'gpt-oss', '--vocab', LLAMA_VOCAB,
    '--ctx', '2048']);
  if (r.code !== 0) throw new Error(`gen-model failed: ${r.stderr}`);
  srv = await startServer({ args: ['--models-dir', dir], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const USER = 'Name three colours.';
const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'],
      additionalProperties: false },
  },
};

test('gpt-oss: listed runnable, family gpt-oss with tools and thinking', async (t) => {
  if (skip) return t.skip(skip);
  const r = await runCli(['list', '--json', '--models-dir', dir], { PARLEY_NO_EXTERNAL_MODELS: '1' });
  assert.equal(r.code, 0, r.stderr);
  const m = JSON.parse(r.stdout).models.find((x) => x.name === MODEL);
  assert.ok(m, r.stdout);
  assert.equal(m.family, 'gpt-oss');
  const show = await new Ollama({ host: srv.url }).show({ model: MODEL });
  for (const c of ['completion', 'tools', 'thinking']) assert.ok(show.capabilities.includes(c), JSON.stringify(show.capabilities));
  assert.equal(show.details.family, 'gpt-oss');
});

test('gpt-oss: LM Studio reports reasoning levels without "off", takes a level and refuses "off"', async (t) => {
  if (skip) return t.skip(skip);
  const list = await (await fetch(`${srv.url}/api/v1/models`)).json();
  const m = list.models.find((x) => x.key === MODEL || x.id === MODEL || x.model_key === MODEL) ??
    list.models.find((x) => JSON.stringify(x).includes(MODEL));
  assert.ok(m, JSON.stringify(list).slice(0, 400));
  assert.deepEqual(m.capabilities.reasoning, { allowed_options: ['low', 'medium', 'high'], default: 'medium' });
  const chat = (reasoning) => fetch(`${srv.url}/api/v1/chat`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, input: USER, max_output_tokens: 4, temperature: 0, reasoning }),
  });
  const ok = await chat('high');
  const b = await ok.json();
  assert.equal(ok.status, 200, JSON.stringify(b));
  assert.ok(b.stats.input_tokens > 20 && b.stats.total_output_tokens >= 1, JSON.stringify(b.stats));
  const off = await chat('off');
  const e = await off.json();
  assert.equal(off.status, 400, JSON.stringify(e));
  assert.match(JSON.stringify(e), /reasoning/);
  assert.match(JSON.stringify(e), /low, medium, high/);
});

// Whether two efforts render the same prompt, seen through the prefix
// cache: the second request of a pair reuses the whole prompt of the first
// when they agree, and stops at the system message's "Reasoning: LEVEL"
// line (followed by some 40 more tokens) when they do not.
test('gpt-oss: every OpenAI reasoning_effort is accepted and names of one level render one prompt', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const ask = (reasoning_effort) => client.chat.completions.create({
    model: MODEL, max_tokens: 2, temperature: 0, reasoning_effort, messages: [{ role: 'user', content: USER }],
  });
  const pair = async (a, b) => {
    await ask(a);
    const r = await ask(b);
    assert.equal(r.choices[0].message.role, 'assistant');
    return { prompt: r.usage.prompt_tokens, cached: r.usage.prompt_tokens_details.cached_tokens };
  };
  for (const [a, b] of [['none', 'low'], ['minimal', 'low'], ['xhigh', 'high'], ['max', 'high'], ['medium', 'medium']]) {
    const u = await pair(a, b);
    assert.ok(u.cached >= u.prompt - 4, `${a} then ${b}: ${JSON.stringify(u)}`);
  }
  for (const [a, b] of [['low', 'high'], ['high', 'medium'], ['medium', 'low']]) {
    const u = await pair(a, b);
    assert.ok(u.cached <= u.prompt - 20, `${a} then ${b}: ${JSON.stringify(u)}`);
  }
  await assert.rejects(client.chat.completions.create({
    model: MODEL, max_tokens: 4, reasoning_effort: 'extreme', messages: [{ role: 'user', content: USER }],
  }), (e) => e.status === 400 && /reasoning_effort/.test(e.message));
});

test('gpt-oss: Anthropic thinking budgets and output_config.effort are accepted', async (t) => {
  if (skip) return t.skip(skip);
  const client = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
  for (const extra of [{ thinking: { type: 'enabled', budget_tokens: 1024 } }, { thinking: { type: 'disabled' } },
    { thinking: { type: 'adaptive' }, output_config: { effort: 'high' } }]) {
    const r = await client.messages.create({
      model: MODEL, max_tokens: 4, temperature: 0, messages: [{ role: 'user', content: USER }], ...extra,
    });
    assert.equal(r.type, 'message', JSON.stringify(extra));
    for (const c of r.content) assert.ok(['text', 'thinking'].includes(c.type), c.type);
    if (extra.thinking.type === 'disabled') assert.ok(!r.content.some((c) => c.type === 'thinking'));
  }
  // budgets map to levels (<= 1024 low, <= 2048 medium, above high), and
  // output_config.effort wins over a budget: seen through the prefix cache
  const ask = (extra) => client.messages.create({
    model: MODEL, max_tokens: 2, temperature: 0, messages: [{ role: 'user', content: USER }], ...extra,
  });
  const budget = (n) => ({ thinking: { type: 'enabled', budget_tokens: n } });
  const pair = async (a, b) => {
    await ask(a);
    const u = (await ask(b)).usage;
    return { prompt: u.input_tokens + (u.cache_read_input_tokens ?? 0), cached: u.cache_read_input_tokens ?? 0 };
  };
  for (const [a, b] of [[budget(1024), budget(600)], [budget(2048), budget(1500)], [budget(4096), budget(30000)],
    [budget(1024), { ...budget(30000), output_config: { effort: 'low' } }]]) {
    const u = await pair(a, b);
    assert.ok(u.cached >= u.prompt - 4, `${JSON.stringify(a)} then ${JSON.stringify(b)}: ${JSON.stringify(u)}`);
  }
  for (const [a, b] of [[budget(1024), budget(2048)], [budget(2048), budget(4096)]]) {
    const u = await pair(a, b);
    assert.ok(u.cached <= u.prompt - 20, `${JSON.stringify(a)} then ${JSON.stringify(b)}: ${JSON.stringify(u)}`);
  }
});

test('gpt-oss: Ollama think levels and true are accepted, false returns no thinking, a bad level is refused', async (t) => {
  if (skip) return t.skip(skip);
  const client = new Ollama({ host: srv.url });
  for (const think of ['low', 'medium', 'high', 'max', true, false]) {
    const r = await client.chat({
      model: MODEL, think, options: { num_predict: 4, temperature: 0 }, messages: [{ role: 'user', content: USER }],
    });
    assert.equal(r.done, true, String(think));
    if (think === false) assert.equal(r.message.thinking, undefined);
  }
  await assert.rejects(client.chat({ model: MODEL, think: 'extreme', messages: [{ role: 'user', content: USER }] }),
    (e) => /invalid think value/.test(e.message));
});

test('gpt-oss: a forced tool call comes back parsed from harmony through OpenAI and Anthropic', async (t) => {
  if (skip) return t.skip(skip);
  const openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const r = await openai.chat.completions.create({
      model: MODEL, max_tokens: 60, temperature: 1, seed: 3, tools: [weather], tool_choice, reasoning_effort: 'low',
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    const args = JSON.parse(c.message.tool_calls[0].function.arguments);
    assert.equal(typeof args.city, 'string');
    assert.deepEqual(Object.keys(args), ['city']);
  }
  const anthropic = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
  const r = await anthropic.messages.create({
    model: MODEL, max_tokens: 60, temperature: 1, tool_choice: { type: 'any' },
    tools: [{ name: 'get_weather', description: 'Current weather', input_schema: weather.function.parameters }],
    messages: [{ role: 'user', content: 'Weather in Oslo?' }],
  });
  assert.equal(r.stop_reason, 'tool_use', JSON.stringify(r.content));
  const use = r.content.find((c) => c.type === 'tool_use');
  assert.ok(use, JSON.stringify(r.content));
  assert.equal(use.name, 'get_weather');
  assert.equal(typeof use.input.city, 'string');
});
