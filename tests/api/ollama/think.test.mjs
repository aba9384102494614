// think.test.mjs - thinking and tool calls on a model whose template opens
// a <think> block (org/think, the Anthropic tests' Llama-3-style template:
// the family detector gives it the llama3 output parser and the reasoning
// capability). With random weights the model never closes the block, so an
// answer with thinking on is all `thinking`; `think: false` must leave the
// field out. A format shaped like a Llama 3 call ({"name", "parameters"})
// makes the parser see a real tool call, so Ollama's tool_call rendering
// (id `call_`, arguments an object, index always present) is testable.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB } from '../lib/models.mjs';
import { THINK_TEMPLATE } from '../anthropic/setup.mjs';
import { setup, teardown, post, checkDone } from './setup.mjs';

const THINK = 'org/think';
let ctx;
const skipped = (t) => { if (ctx.skip) { t.skip(ctx.skip); return true; } return false; };
before(async () => {
  ctx = await setup({
    prepare: async (dir) => {
      const tmpl = path.join(dir, 'think.jinja.txt');
      writeFileSync(tmpl, THINK_TEMPLATE);
      const r = await runCli(['gen-model', path.join(dir, 'org/think.gguf'), '--vocab', LLAMA_VOCAB,
        '--chat-template', tmpl, '--ctx', '1024', '--seed', '3']);
      rmSync(tmpl);
      if (r.code !== 0) throw new Error(`gen-model failed: ${r.stderr}`);
    },
  });
});
after(async () => { await teardown(ctx); });

const msgs = [{ role: 'user', content: 'Weather in Oslo?' }];
const tools = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'] } },
}];
const CALL_FORMAT = {
  type: 'object',
  properties: {
    name: { const: 'get_weather' },
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false },
  },
  required: ['name', 'parameters'], additionalProperties: false,
};

test('capabilities list thinking and tools', async (t) => {
  if (skipped(t)) return;
  const caps = (await ctx.client.show({ model: THINK })).capabilities;
  assert.ok(caps.includes('thinking') && caps.includes('tools') && caps.includes('completion'), caps.join());
});

test('think unset or true: output goes to thinking, never as raw tags; think false: no thinking field', async (t) => {
  if (skipped(t)) return;
  for (const think of [undefined, true, 'high']) {
    const r = await ctx.client.chat({ model: THINK, messages: msgs, think, stream: false, options: { num_predict: 6, temperature: 0 } });
    checkDone(r);
    assert.ok(r.message.thinking && r.message.thinking.length > 0, JSON.stringify(r.message));
    assert.ok(!/<\/?think>/.test(r.message.thinking + r.message.content));
  }
  const off = await ctx.client.chat({ model: THINK, messages: msgs, think: false, stream: false, options: { num_predict: 6 } });
  assert.equal(off.message.thinking, undefined);
  let thinking = '';
  for await (const r of await ctx.client.chat({ model: THINK, messages: msgs, stream: true, options: { num_predict: 6 } })) {
    thinking += r.message.thinking ?? '';
    assert.equal(typeof r.message.content, 'string');
  }
  assert.ok(thinking.length > 0);
  const g = await ctx.client.generate({ model: THINK, prompt: 'hi', stream: false, options: { num_predict: 4 } });
  assert.ok(g.thinking && g.thinking.length > 0, JSON.stringify(g));
  const gOff = await ctx.client.generate({ model: THINK, prompt: 'hi', think: false, stream: false, options: { num_predict: 4 } });
  assert.equal(gOff.thinking, undefined);
});

test('tool calls: id call_xxxxxxxx, arguments an object, index present (streamed and not)', async (t) => {
  if (skipped(t)) return;
  const req = { model: THINK, messages: msgs, tools, think: false, format: CALL_FORMAT, options: { num_predict: 80, temperature: 0 } };
  const r = await ctx.client.chat({ ...req, stream: false });
  checkDone(r);
  assert.equal(r.message.tool_calls?.length, 1, JSON.stringify(r.message));
  const call = r.message.tool_calls[0];
  assert.match(call.id, /^call_[a-z0-9]{8}$/);
  assert.equal(call.function.name, 'get_weather');
  assert.equal(call.function.index, 0);
  assert.equal(typeof call.function.arguments, 'object');
  assert.equal(typeof call.function.arguments.city, 'string');
  const raw = await post(ctx.srv, '/api/chat', { ...req, stream: true });
  assert.match(raw.text, /"index":0/, 'index is serialised even when 0');
  const calls = [];
  for await (const x of await ctx.client.chat({ ...req, stream: true })) calls.push(...(x.message.tool_calls ?? []));
  assert.equal(calls.length, 1);
  assert.match(calls[0].id, /^call_/);
  assert.deepEqual(Object.keys(calls[0].function.arguments), ['city']);
  // the round trip: the call and its result go back in
  const back = await ctx.client.chat({
    model: THINK, tools, stream: false, think: false, options: { num_predict: 3 },
    messages: [...msgs, { role: 'assistant', content: '', tool_calls: [call] }, { role: 'tool', content: '-3 C', tool_name: 'get_weather' }],
  });
  checkDone(back);
});
