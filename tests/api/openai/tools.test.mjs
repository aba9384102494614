// tools.test.mjs - forced tool calls through the official `openai` SDK: with
// tool_choice "required" or a named function the grammar sampler makes even a
// random-weight model write a call in its family's syntax (here Hermes-style
// <tool_call> JSON, the real Qwen2.5 template), so the whole tool-call path is
// exercised end to end: parser, tool_calls in the message, streamed deltas
// with a stable index and id, finish_reason "tool_calls", the SDK's runTools
// loop, and the Responses API's function_call items.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const MODEL = 'org/hermes';
let srv, client, models, skip;

before(async () => {
  models = await makeModelsDir({ hermes: true });
  if (models.skip || models.hermesSkip) { skip = models.skip || models.hermesSkip; return; }
  srv = await startServer({ args: ['--models-dir', models.dir, '--parallel', '2'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer' } },
      required: ['city'], additionalProperties: false },
  },
};
const time = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] } } };
const base = { model: MODEL, messages: [{ role: 'user', content: 'What is the weather in Oslo?' }], max_tokens: 120 };

function checkWeatherArgs(text) {
  const args = JSON.parse(text);
  assert.equal(typeof args.city, 'string');
  assert.ok([...args.city].length <= 12);
  for (const k of Object.keys(args)) assert.ok(['city', 'days'].includes(k), k);
  if ('days' in args) assert.ok(Number.isInteger(args.days));
}

test('tool_choice "required": a parsed call whose arguments satisfy the schema', async (t) => {
  if (skip) return t.skip(skip);
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({ ...base, tools: [weather], tool_choice: 'required', seed, temperature: 1 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.match(call.id, /^call_/);
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    checkWeatherArgs(call.function.arguments);
  }
});

test('a named function is the one called, among several tools', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.chat.completions.create({ ...base, tools: [weather, time],
    tool_choice: { type: 'function', function: { name: 'get_time' } } });
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_time');
  assert.ok(['UTC', 'CET'].includes(JSON.parse(call.function.arguments).tz));
  await assert.rejects(client.chat.completions.create({ ...base, tools: [weather],
    tool_choice: { type: 'function', function: { name: 'nope' } } }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, 'tool_choice');
    return true;
  });
});

test('streamed tool-call deltas: one index, one id, arguments joining to valid JSON', async (t) => {
  if (skip) return t.skip(skip);
  const stream = await client.chat.completions.create({ ...base, tools: [weather], tool_choice: 'required', stream: true });
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
  checkWeatherArgs(args);
});

test('runTools: the SDK calls our function with parsed arguments and sends the result back', async (t) => {
  if (skip) return t.skip(skip);
  const calls = [];
  const runner = client.chat.completions.runTools({
    ...base,
    tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: weather.function.parameters,
      parse: JSON.parse, function: (args) => { calls.push(args); return { temp: 3 }; } } }],
  }, { maxChatCompletions: 2 });
  const msgs = [];
  runner.on('message', (m) => msgs.push(m));
  await runner.done();
  assert.ok(calls.length >= 1);
  assert.equal(typeof calls[0].city, 'string');
  const toolMsg = msgs.find((m) => m.role === 'tool');
  assert.ok(toolMsg, 'the tool result went back as a tool message');
  assert.equal(JSON.parse(toolMsg.content).temp, 3);
});

test('Responses: a forced function call is a function_call item, streamed in order', async (t) => {
  if (skip) return t.skip(skip);
  const tools = [{ type: 'function', name: 'get_weather', parameters: weather.function.parameters, strict: true }];
  const r = await client.responses.create({ model: MODEL, input: 'Weather in Oslo?', tools, tool_choice: 'required', max_output_tokens: 120 });
  const fc = r.output.find((o) => o.type === 'function_call');
  assert.ok(fc, JSON.stringify(r.output));
  assert.match(fc.call_id, /^call_/);
  assert.equal(fc.name, 'get_weather');
  checkWeatherArgs(fc.arguments);
  const stream = client.responses.stream({ model: MODEL, input: 'Weather?', tools,
    tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 120 });
  const types = [];
  for await (const ev of stream) types.push(ev.type);
  const final = await stream.finalResponse();
  const sfc = final.output.find((o) => o.type === 'function_call');
  checkWeatherArgs(sfc.arguments);
  assert.ok(types.includes('response.function_call_arguments.delta'));
  assert.ok(types.indexOf('response.function_call_arguments.done') < types.lastIndexOf('response.output_item.done'));
  // The call and its output continue the conversation.
  const next = await client.responses.create({ model: MODEL, previous_response_id: final.id, tools, max_output_tokens: 16,
    input: [{ type: 'function_call_output', call_id: sfc.call_id, output: '{"temp":3}' }] });
  assert.ok(next.usage.input_tokens > final.usage.input_tokens);
});
