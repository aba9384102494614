// chat.test.mjs - POST /api/chat through the official `ollama` client:
// streamed and single answers, the done record, load/unload, tools accepted
// (and a tool round trip), role case, format with a closed schema, images
// and the error paths of the spec's conformance list for chat.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, teardown, post, ndjson, checkDone, MODEL } from './setup.mjs';

let ctx;
const skipped = (t) => { if (ctx.skip) { t.skip(ctx.skip); return true; } return false; };
// A second llama whose template shows no tools (it gets the generic tool prompt).
async function addPlainModel(dir) {
  const { writeFileSync, rmSync } = await import('node:fs');
  const path = (await import('node:path')).default;
  const { runCli } = await import('../lib/server.mjs');
  const { LLAMA_VOCAB } = await import('../lib/models.mjs');
  const tmpl = path.join(dir, 'plain.jinja.txt');
  writeFileSync(tmpl, "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}</s>\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}");
  const r = await runCli(['gen-model', path.join(dir, 'plain.gguf'), '--vocab', LLAMA_VOCAB, '--chat-template', tmpl, '--ctx', '512']);
  rmSync(tmpl);
  if (r.code !== 0) throw new Error(`gen-model failed: ${r.stderr}`);
}
before(async () => { ctx = await setup({ prepare: addPlainModel }); });
after(async () => { await teardown(ctx); });

const msgs = [{ role: 'user', content: 'Hello there' }];
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', required: ['city'], properties: { city: { type: 'string', description: 'the city' } } },
  },
}];

test('stream: assistant deltas, then the done record with all six metrics', async (t) => {
  if (skipped(t)) return;
  const recs = [];
  for await (const r of await ctx.client.chat({ model: MODEL, messages: msgs, stream: true, options: { num_predict: 5 } })) recs.push(r);
  for (const r of recs.slice(0, -1)) {
    assert.equal(r.done, false);
    assert.equal(r.message.role, 'assistant');
    assert.equal(typeof r.message.content, 'string');
  }
  const last = recs.at(-1);
  checkDone(last);
  assert.equal(last.context, undefined, 'chat has no context');
  assert.equal(last.message.role, 'assistant');
});

test('stream:false answers one object; its content equals the streamed text (fixed seed)', async (t) => {
  if (skipped(t)) return;
  const req = { model: MODEL, messages: msgs, options: { num_predict: 7, temperature: 0, seed: 3 } };
  const one = await ctx.client.chat({ ...req, stream: false });
  checkDone(one);
  assert.equal(one.eval_count, 7);
  let text = '';
  for await (const r of await ctx.client.chat({ ...req, stream: true })) text += r.message.content;
  assert.equal(one.message.content, text);
  const raw = await post(ctx.srv, '/api/chat', { ...req });
  assert.match(raw.type, /application\/x-ndjson/, 'stream absent means streaming');
  checkDone(ndjson(raw.text).at(-1));
});

test('empty messages load; keep_alive 0 unloads', async (t) => {
  if (skipped(t)) return;
  const l = (await post(ctx.srv, '/api/chat', { model: MODEL, messages: [] })).json();
  assert.deepEqual([l.done, l.done_reason, l.message.role, l.message.content], [true, 'load', 'assistant', '']);
  const u = (await post(ctx.srv, '/api/chat', { model: MODEL, messages: [], keep_alive: 0 })).json();
  assert.equal(u.done_reason, 'unload');
});

test('tools are accepted; a tool round trip (assistant tool_calls, role tool with tool_name) renders', async (t) => {
  if (skipped(t)) return;
  const r = await ctx.client.chat({ model: MODEL, messages: msgs, tools, stream: false, options: { num_predict: 4 } });
  checkDone(r);
  for (const c of r.message.tool_calls ?? []) {
    assert.match(c.id, /^call_/);
    assert.equal(typeof c.function.arguments, 'object');
    assert.equal(typeof c.function.index, 'number');
  }
  const trip = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: '18 C and sunny', tool_name: 'get_weather' },
  ];
  const r2 = await ctx.client.chat({ model: MODEL, messages: trip, tools, stream: false, options: { num_predict: 3 } });
  checkDone(r2);
  const s = [];
  for await (const x of await ctx.client.chat({ model: MODEL, messages: trip, tools, stream: true, options: { num_predict: 3 } })) s.push(x);
  checkDone(s.at(-1));
});

test('role case is folded ("USER" is user); thinking of earlier turns is accepted', async (t) => {
  if (skipped(t)) return;
  const dbg = (await post(ctx.srv, '/api/chat', { model: MODEL, messages: [{ role: 'USER', content: 'hey' }], _debug_render_only: true })).json();
  assert.match(dbg._debug_info.rendered_template, /<\|user\|>\nhey/);
  const r = await ctx.client.chat({
    model: MODEL, stream: false, options: { num_predict: 2 },
    messages: [{ role: 'USER', content: 'a' }, { role: 'assistant', content: 'b', thinking: 'hmm' }, { role: 'user', content: 'c' }],
  });
  checkDone(r);
});

test('format: a closed schema yields a matching document (streamed and not)', async (t) => {
  if (skipped(t)) return;
  const schema = {
    type: 'object',
    properties: { color: { type: 'string', enum: ['red', 'green', 'blue'] }, ok: { type: 'boolean' } },
    required: ['color', 'ok'], additionalProperties: false,
  };
  const check = (text) => {
    const doc = JSON.parse(text);
    assert.deepEqual(Object.keys(doc).sort(), ['color', 'ok']);
    assert.ok(['red', 'green', 'blue'].includes(doc.color));
    assert.equal(typeof doc.ok, 'boolean');
  };
  for (const seed of [4, 5]) {
    const r = await ctx.client.chat({ model: MODEL, messages: msgs, format: schema, stream: false, options: { num_predict: 120, temperature: 1, seed } });
    assert.equal(r.done_reason, 'stop');
    check(r.message.content);
  }
  let text = '';
  for await (const r of await ctx.client.chat({ model: MODEL, messages: msgs, format: schema, stream: true, options: { num_predict: 120, seed: 9 } })) text += r.message.content;
  check(text);
  const j = await ctx.client.chat({ model: MODEL, messages: msgs, format: 'json', stream: false, options: { num_predict: 30 } });
  assert.match(j.message.content.trimStart(), /^\{/);
});

test('images: invalid base64 is 400; valid images on a model without vision are 400 naming images', async (t) => {
  if (skipped(t)) return;
  const bad = await post(ctx.srv, '/api/chat', { model: MODEL, messages: [{ role: 'user', content: 'x', images: ['data:image/png;base64,AAAA'] }] });
  assert.equal(bad.status, 400);
  assert.match(bad.json().error, /images\[0\]/);
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
  await assert.rejects(ctx.client.chat({ model: MODEL, messages: [{ role: 'user', content: 'x', images: [png] }] }), (e) => {
    assert.equal(e.status_code, 400);
    assert.match(e.error, /does not support images/);
    return true;
  });
});

test('error paths: model required, unknown model, invalid name, bad role, bad tools, think', async (t) => {
  if (skipped(t)) return;
  const cases = [
    [{ model: '', messages: msgs }, 400, 'model is required'],
    ['null', 400, 'model is required'],
    [{ model: 'nope', messages: msgs }, 404, "model 'nope' not found"],
    [{ model: 'a/b/c/d/e', messages: msgs }, 400, 'invalid model name'],
    [{ model: MODEL, messages: [{ role: 'wizard', content: 'x' }] }, 400, null],
    [{ model: MODEL, messages: [{ role: 'user', content: ['parts'] }] }, 400, null],
    [{ model: MODEL, messages: msgs, tools: [{ type: 'function', function: {} }] }, 400, null],
    [{ model: MODEL, messages: msgs, think: true }, 400, `"${MODEL}" does not support thinking`],
    [{ model: MODEL, messages: msgs, think: 'bogus' }, 400, null],
    [{ model: MODEL, messages: 'hi' }, 400, null],
  ];
  for (const [body, status, msg] of cases) {
    const r = await post(ctx.srv, '/api/chat', body);
    assert.equal(r.status, status, `${JSON.stringify(body)} -> ${r.text}`);
    const e = r.json();
    assert.equal(typeof e.error, 'string');
    if (msg) assert.equal(e.error, msg);
  }
  const ok = await ctx.client.chat({ model: MODEL, messages: msgs, think: false, stream: false, options: { num_predict: 1 } });
  assert.equal(ok.message.thinking, undefined);
  const wrong = await fetch(`${ctx.srv.url}/api/chat`);
  assert.equal(wrong.status, 405);
});

test('the same conversation as OpenAI chat, Anthropic messages and Ollama chat renders to the same prompt tokens', async (t) => {
  if (skipped(t)) return;
  const { default: OpenAI } = await import('openai');
  const oa = new OpenAI({ baseURL: `${ctx.srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const conv = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Weather in Paris?' },
  ];
  const o = await oa.chat.completions.create({ model: MODEL, messages: conv, max_tokens: 1 });
  const l = await ctx.client.chat({ model: MODEL, messages: conv, stream: false, options: { num_predict: 1 } });
  assert.equal(l.prompt_eval_count, o.usage.prompt_tokens);
  const { default: Anthropic } = await import('@anthropic-ai/sdk');
  const an = new Anthropic({ baseURL: ctx.srv.url, apiKey: 'x', maxRetries: 0 });
  const a = await an.messages.create({ model: MODEL, system: 'Be brief.', messages: [conv[1]], max_tokens: 1 });
  // Anthropic counts cache reads apart from input_tokens
  assert.equal(a.usage.input_tokens + (a.usage.cache_read_input_tokens ?? 0) + (a.usage.cache_creation_input_tokens ?? 0),
    l.prompt_eval_count);
  // with a tool round trip: OpenAI sends arguments as JSON text, Ollama as an object
  const oaConv = [...conv,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '18 C' }];
  const olConv = [...conv,
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '18 C' }];
  const o2 = await oa.chat.completions.create({ model: MODEL, messages: oaConv, tools, max_tokens: 1 });
  const l2 = await ctx.client.chat({ model: MODEL, messages: olConv, tools, stream: false, options: { num_predict: 1 } });
  assert.equal(l2.prompt_eval_count, o2.usage.prompt_tokens);
});

test('U+0000 in the history is part of the prompt, as Ollama keeps it', async (t) => {
  if (skipped(t)) return;
  const count = async (content, thinking) => (await ctx.client.chat({ model: MODEL, stream: false, options: { num_predict: 1 },
    messages: [{ role: 'user', content }, { role: 'assistant', content: 'ok', thinking }, { role: 'user', content: 'go' }] })).prompt_eval_count;
  const plain = await count('abcd');
  const nul = await count('ab\u0000cd');
  assert.ok(nul > plain, `"ab\\u0000cd" is ${nul} prompt tokens, "abcd" ${plain}: the text was cut at the NUL`);
});

test('a prompt over the context: 400 with Ollama\'s own words, streaming or not', async (t) => {
  if (skipped(t)) return;
  const long = [{ role: 'user', content: 'hello world '.repeat(400) }]; // > 512 positions
  for (const stream of [false, true]) {
    await assert.rejects(ctx.client.chat({ model: 'plain', messages: long, stream }), (e) => {
      assert.equal(e.status_code, 400);
      assert.equal(e.error, 'the input length exceeds the context length');
      return true;
    });
  }
});

test('tools on a model whose template shows none: the generic tool prompt, never dropped, never refused', async (t) => {
  if (skipped(t)) return;
  const caps = (await ctx.client.show({ model: 'plain' })).capabilities;
  assert.ok(caps.includes('completion') && caps.includes('tools'), caps.join());
  const opts = { num_predict: 1 };
  const bare = await ctx.client.chat({ model: 'plain', messages: msgs, stream: false, options: opts });
  const withTools = await ctx.client.chat({ model: 'plain', messages: msgs, tools, stream: false, options: opts });
  assert.equal(withTools.done, true);
  // the tools reach the prompt: Hermes-style instructions plus the tool's JSON
  assert.ok(withTools.prompt_eval_count > bare.prompt_eval_count + 100,
    `${withTools.prompt_eval_count} prompt tokens with tools, ${bare.prompt_eval_count} without`);
  // a tool round trip renders too (the call and its result as text turns)
  const round = await ctx.client.chat({ model: 'plain', stream: false, options: opts, tools, messages: [...msgs,
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: '18 C' }] });
  assert.ok(round.prompt_eval_count > withTools.prompt_eval_count, 'the call and the result are part of the prompt');
});
