// tools_families.test.mjs - forced tool calls (tool_choice "required" or a
// named function) for the families whose call syntax is not Hermes or Llama 3,
// end to end through the official `openai` SDK: random-weight llama models
// carrying the real chat templates from ../shared/templates are detected as
// Mistral (Mistral-Nemo: [TOOL_CALLS] prefilled, then the JSON list),
// Functionary v3.1 (<function=NAME>{..}</function>, all text) and DeepSeek-R1
// distill (the think block closed and <｜tool▁calls▁begin｜>...function<｜tool▁sep｜>
// prefilled, then NAME, a ```json fence and the arguments). Each forced
// call must come back parsed (finish_reason "tool_calls") with arguments
// that satisfy the tool's schema, streamed or not.
// Granite (granite architecture) and GPT-OSS (gpt-oss architecture) cannot
// run on the generated llama models; tests/unit/test_gen_tools.c covers them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB, sharedTemplate, templateArgs } from '../lib/models.mjs';

// Without ../shared a model gets no template and, where the family is told
// by the template's marks, a name the family table knows (hint): its
// family's default template and parser then run.
const FAMILIES = [
  { model: 'org/mistral', family: 'mistral', template: 'mistralai-Mistral-Nemo-Instruct-2407.jinja',
    hint: 'Mistral-Nemo-Instruct-2407' },
  { model: 'org/functionary', family: 'functionary', template: 'meetkai-functionary-medium-v3.1.jinja',
    name: 'functionary-medium-v3.1' },
  { model: 'org/deepseek', family: 'deepseek-r1-distill', template: 'deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja',
    hint: 'DeepSeek-R1-Distill-Llama-8B' },
];

let srv, client, dir, skip;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-families-'));
  mkdirSync(path.join(dir, 'org'));
  for (const f of FAMILIES) {
    const tmpl = sharedTemplate(f.template);
    const args = ['gen-model', path.join(dir, `${f.model}.gguf`), '--vocab', LLAMA_VOCAB,
      ...templateArgs(tmpl), '--ctx', '2048'];
    const name = f.name ?? (tmpl ? null : f.hint);
    if (name) args.push('--name', name);
    const r = await runCli(args);
    if (r.code !== 0) throw new Error(`gen-model (${f.model}) failed: ${r.stderr}`);
  }
  srv = await startServer({ args: ['--models-dir', dir, '--parallel', '2'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer' } },
      required: ['city'], additionalProperties: false },
  },
};
const time = { type: 'function', function: { name: 'get_time', description: 'Current time',
  parameters: { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'], additionalProperties: false } } };

// The arguments satisfy the called tool's schema (checked by hand: the
// schemas above use only type, maxLength, enum, required and
// additionalProperties false).
function checkArgs(name, text) {
  const args = JSON.parse(text);
  assert.equal(typeof args, 'object');
  if (name === 'get_weather') {
    assert.equal(typeof args.city, 'string');
    assert.ok([...args.city].length <= 12);
    for (const k of Object.keys(args)) assert.ok(['city', 'days'].includes(k), k);
    if ('days' in args) assert.ok(Number.isInteger(args.days));
  } else {
    assert.equal(name, 'get_time');
    assert.ok(['UTC', 'CET'].includes(args.tz));
    assert.deepEqual(Object.keys(args), ['tz']);
  }
}

const messages = [{ role: 'user', content: 'What is the weather in Oslo, and what time is it?' }];

test('the generated models are detected as the families under test', async (t) => {
  if (skip) return t.skip(skip);
  const r = await runCli(['list', '--json', '--models-dir', dir], { PARLEY_NO_EXTERNAL_MODELS: '1' });
  assert.equal(r.code, 0, r.stderr);
  const listed = JSON.parse(r.stdout).models;
  for (const f of FAMILIES) {
    const m = listed.find((x) => x.name === f.model);
    assert.ok(m, `${f.model} listed`);
    assert.equal(m.family, f.family, f.model);
  }
});

for (const f of FAMILIES) {
  test(`${f.family}: tool_choice "required" gives a parsed call valid against its tool's schema`, async (t) => {
    if (skip) return t.skip(skip);
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({ model: f.model, messages, tools: [weather, time],
        tool_choice: 'required', seed, temperature: 1, max_tokens: 200 });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', `seed ${seed}: ${JSON.stringify(c.message)}`);
      assert.equal(c.message.tool_calls.length, 1);
      const call = c.message.tool_calls[0];
      assert.match(call.id, /^call_/);
      assert.ok(['get_weather', 'get_time'].includes(call.function.name), call.function.name);
      checkArgs(call.function.name, call.function.arguments);
      assert.ok(!c.message.content, `no text besides the call: ${JSON.stringify(c.message.content)}`);
    }
  });

  test(`${f.family}: a named function is the one called, also when streamed`, async (t) => {
    if (skip) return t.skip(skip);
    const r = await client.chat.completions.create({ model: f.model, messages, tools: [weather, time],
      tool_choice: { type: 'function', function: { name: 'get_time' } }, max_tokens: 200 });
    assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0].message));
    const call = r.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'get_time');
    checkArgs('get_time', call.function.arguments);

    const stream = await client.chat.completions.create({ model: f.model, messages, tools: [weather, time],
      tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 200, stream: true });
    const ids = new Set();
    let args = '';
    let name = null;
    let finish = null;
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (!ch) continue;
      for (const tc of ch.delta?.tool_calls ?? []) {
        assert.equal(tc.index, 0);
        if (tc.id) ids.add(tc.id);
        if (tc.function?.name) name = tc.function.name;
        args += tc.function?.arguments ?? '';
      }
      finish = ch.finish_reason ?? finish;
    }
    assert.equal(ids.size, 1);
    assert.equal(name, 'get_weather');
    assert.equal(finish, 'tool_calls');
    checkArgs('get_weather', args);
  });
}
