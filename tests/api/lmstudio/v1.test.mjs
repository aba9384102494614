// v1.test.mjs - LM Studio REST API v1 over plain HTTP, on /api/v1 and on
// the /lmstudio/v1 aliases (spec ../shared/specs/lmstudio.md section 2 and
// conformance checks 14-26): stateful chat, the named SSE event sequence,
// model listing, load/unload, download and its status. Random-weight model:
// shapes and invariants only.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startServer, runCli } from '../lib/server.mjs';
import { makeModelsDir, LLAMA_VOCAB } from '../lib/models.mjs';
import { client, assertError } from './lib.mjs';

const MODEL = 'org/tiny';
const THINKER = 'org/thinker';
// A template whose generation prompt opens a <think> block (closed at once
// when enable_thinking is false): the family gains the reasoning capability,
// and a random model never closes the block, so its text is reasoning.
const THINK_TEMPLATE =
  "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}</s>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|assistant|>\n{% if enable_thinking is defined and not enable_thinking %}" +
  "<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}{% endif %}";
const PREFIXES = ['/api/v1', '/lmstudio/v1'];
let srv, models, skip, c;

before(async () => {
  models = await makeModelsDir({ bert: true });
  if (models.skip) { skip = models.skip; return; }
  const tmpl = path.join(models.dir, 'think.jinja.txt');
  writeFileSync(tmpl, THINK_TEMPLATE);
  const g = await runCli(['gen-model', path.join(models.dir, 'org/thinker.gguf'), '--vocab', LLAMA_VOCAB,
    '--chat-template', tmpl, '--ctx', '512']);
  if (g.code !== 0) throw new Error(`gen-model failed: ${g.stderr}`);
  rmSync(tmpl);
  srv = await startServer({
    args: ['--models-dir', models.dir, '--parallel', '2'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  c = client(srv.url);
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const chat = (extra = {}) => ({ model: MODEL, input: 'Hello there', max_output_tokens: 5, temperature: 0, ...extra });

function assertResult(b, { stored = true, model = MODEL } = {}) {
  assert.equal(b.model_instance_id, model);
  assert.ok(Array.isArray(b.output) && b.output.length >= 1);
  const kinds = b.output.map((o) => o.type);
  for (const k of kinds) assert.ok(['message', 'reasoning', 'tool_call', 'invalid_tool_call'].includes(k), k);
  assert.equal(kinds.at(-1), 'message');
  for (const o of b.output) if (o.type === 'message' || o.type === 'reasoning') assert.equal(typeof o.content, 'string');
  for (const k of ['input_tokens', 'total_output_tokens', 'reasoning_output_tokens']) assert.ok(Number.isInteger(b.stats[k]), k);
  for (const k of ['tokens_per_second', 'time_to_first_token_seconds']) assert.equal(typeof b.stats[k], 'number', k);
  assert.ok(b.stats.input_tokens > 0);
  if (stored) assert.match(b.response_id, /^resp_/);
  else assert.equal(b.response_id, undefined);
}

// Checks the grammar of a v1 stream and returns the chat.end result.
function assertStream(r, { load, model = MODEL }) {
  assert.equal(r.status, 200);
  const ev = r.events;
  const names = ev.map((e) => e.event);
  for (const e of ev) {
    assert.equal(typeof e.event, 'string', 'every frame is named');
    assert.equal(e.data.type, e.event, `data.type repeats the event name: ${JSON.stringify(e.data)}`);
  }
  assert.equal(names[0], 'chat.start');
  assert.equal(names.at(-1), 'chat.end');
  assert.equal(names.filter((n) => n === 'chat.start').length, 1);
  assert.equal(names.filter((n) => n === 'chat.end').length, 1);
  assert.equal(ev[0].data.model_instance_id, model);
  const loads = names.filter((n) => n.startsWith('model_load.'));
  if (load) assert.deepEqual(loads.slice(0, 1).concat(loads.slice(-1)), ['model_load.start', 'model_load.end']);
  else assert.deepEqual(loads, []);
  for (const e of ev) if ('progress' in e.data) assert.ok(e.data.progress >= 0 && e.data.progress <= 1);
  const at = (n) => names.indexOf(n);
  assert.ok(at('prompt_processing.start') > 0);
  assert.ok(at('prompt_processing.end') > at('prompt_processing.start'));
  if (load) assert.ok(names.lastIndexOf('model_load.end') < at('prompt_processing.start'));
  // blocks: X.start, X.delta..., X.end, never nested, after prompt processing
  let open = null, message = '', reasoning = '';
  for (const [i, n] of names.entries()) {
    const m = n.match(/^(message|reasoning)\.(start|delta|end)$/);
    if (!m) continue;
    assert.ok(i > at('prompt_processing.end'), `${n} before prompt_processing.end`);
    if (m[2] === 'start') { assert.equal(open, null, `${n} inside ${open}`); open = m[1]; }
    else assert.equal(open, m[1], `${n} outside its block`);
    if (m[2] === 'end') open = null;
    if (m[2] === 'delta') {
      assert.equal(typeof ev[i].data.content, 'string');
      if (m[1] === 'message') message += ev[i].data.content; else reasoning += ev[i].data.content;
    }
  }
  assert.equal(open, null, 'every block ends');
  const result = ev.at(-1).data.result;
  const item = (k) => result.output.find((o) => o.type === k);
  assert.equal(item('message').content, message);
  if (reasoning) assert.equal(item('reasoning').content, reasoning);
  return result;
}

test('21. GET /models on both prefixes: {models:[...]} with the v1 entry fields', async (t) => {
  if (skip) return t.skip(skip);
  for (const p of PREFIXES) {
    const r = await c.get(`${p}/models`);
    assert.equal(r.status, 200, p);
    assert.ok(Array.isArray(r.json.models));
    for (const m of r.json.models) {
      assert.ok(['llm', 'embedding'].includes(m.type));
      for (const k of ['publisher', 'key', 'display_name']) assert.equal(typeof m[k], 'string', k);
      assert.ok('name' in m.quantization && 'bits_per_weight' in m.quantization);
      assert.ok(Number.isInteger(m.size_bytes) && m.size_bytes > 0);
      assert.ok(Array.isArray(m.loaded_instances));
      assert.ok(Number.isInteger(m.max_context_length));
      assert.ok(['gguf', 'mlx', null].includes(m.format));
      if (m.type === 'llm') {
        assert.equal(typeof m.capabilities.vision, 'boolean');
        assert.equal(typeof m.capabilities.trained_for_tool_use, 'boolean');
      } else {
        for (const k of ['capabilities', 'architecture', 'description']) assert.equal(m[k], undefined, k);
      }
    }
    const tiny = r.json.models.find((m) => m.key === MODEL);
    assert.equal(tiny.type, 'llm');
    assert.equal(tiny.architecture, 'llama');
    assert.deepEqual(tiny.loaded_instances, []);
    if (!models.bertSkip) assert.equal(r.json.models.find((m) => m.key === 'embed').type, 'embedding');
  }
});

test('19+17. streamed chat: the event grammar, model_load.* only when this request loads the model', async (t) => {
  if (skip) return t.skip(skip);
  const first = assertStream(await c.sse('/api/v1/chat', chat({ stream: true })), { load: true });
  assertResult(first);
  assert.equal(typeof first.stats.model_load_time_seconds, 'number');
  const second = assertStream(await c.sse('/lmstudio/v1/chat', chat({ stream: true, max_output_tokens: 8 })), { load: false });
  assertResult(second);
  assert.equal(second.stats.model_load_time_seconds, undefined);
  assert.equal(second.stats.total_output_tokens, 8);
});

test('14. non-streamed chat on both prefixes: output items, stats, response_id', async (t) => {
  if (skip) return t.skip(skip);
  for (const p of PREFIXES) {
    const r = await c.post(`${p}/chat`, chat());
    assert.equal(r.status, 200, r.text);
    assertResult(r.json);
    assert.equal(r.json.stats.total_output_tokens, 5);
    assert.equal(r.json.stats.model_load_time_seconds, undefined);
  }
});

test('15. stateful: previous_response_id carries the earlier turns; store:false gives no id; branching', async (t) => {
  if (skip) return t.skip(skip);
  const a = (await c.post('/api/v1/chat', chat({ input: 'My name is Ada.' }))).json;
  assertResult(a);
  const b = (await c.post('/api/v1/chat', chat({ input: 'What is my name?', previous_response_id: a.response_id }))).json;
  assertResult(b);
  assert.notEqual(b.response_id, a.response_id);
  const alone = (await c.post('/api/v1/chat', chat({ input: 'What is my name?' }))).json;
  // the second turn sees the first: its prompt holds both turns and the answer
  assert.ok(b.stats.input_tokens > alone.stats.input_tokens + a.stats.total_output_tokens - 1,
    `${b.stats.input_tokens} vs ${alone.stats.input_tokens}`);
  // a third turn grows again, on the /lmstudio/v1 alias
  const c3 = (await c.post('/lmstudio/v1/chat', chat({ input: 'And again?', previous_response_id: b.response_id }))).json;
  assert.ok(c3.stats.input_tokens > b.stats.input_tokens);
  // branching from the first response twice sees the same history
  const b2 = (await c.post('/api/v1/chat', chat({ input: 'What is my name?', previous_response_id: a.response_id }))).json;
  assert.equal(b2.stats.input_tokens, b.stats.input_tokens);
  // store:false answers without an id, and continuing from it is impossible
  const ns = (await c.post('/api/v1/chat', chat({ store: false }))).json;
  assertResult(ns, { stored: false });
  // streamed answers are stored too
  const s = assertStream(await c.sse('/api/v1/chat', chat({ stream: true, previous_response_id: a.response_id, input: 'What is my name?' })), { load: false });
  assert.equal(s.stats.input_tokens, b.stats.input_tokens);
  const after = (await c.post('/api/v1/chat', chat({ input: 'x', previous_response_id: s.response_id }))).json;
  assert.ok(after.stats.input_tokens > s.stats.input_tokens);
});

test('15. previous_response_id without resp_ or unknown is an error', async (t) => {
  if (skip) return t.skip(skip);
  assertError(await c.post('/api/v1/chat', chat({ previous_response_id: 'abc' })), 400,
    { type: 'invalid_request', param: 'previous_response_id' });
  assertError(await c.post('/api/v1/chat', chat({ previous_response_id: 'resp_doesnotexist' })), 404,
    { param: 'previous_response_id' });
});

test('16. system_prompt is honoured; input items of type text and message; images refused on a text model', async (t) => {
  if (skip) return t.skip(skip);
  const plain = (await c.post('/api/v1/chat', chat())).json;
  const sys = (await c.post('/api/v1/chat', chat({ system_prompt: 'You are a helpful pirate who answers briefly.' }))).json;
  assert.ok(sys.stats.input_tokens > plain.stats.input_tokens + 5);
  for (const type of ['text', 'message']) {
    const r = await c.post('/api/v1/chat', chat({ input: [{ type, content: 'Hello there' }] }));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.stats.input_tokens, plain.stats.input_tokens, type);
  }
  assertError(await c.post('/api/v1/chat', chat({ input: [{ type: 'image', data_url: 'data:image/png;base64,AAAA' }] })), 400,
    { param: 'input' });
  assertError(await c.post('/api/v1/chat', chat({ input: [{ type: 'video', content: 'x' }] })), 400, { param: 'input' });
  assertError(await c.post('/api/v1/chat', chat({ input: 42 })), 400, { param: 'input' });
});

test('18. reasoning: a setting the model does not support is an error; off is accepted', async (t) => {
  if (skip) return t.skip(skip);
  assertError(await c.post('/api/v1/chat', chat({ reasoning: 'on' })), 400, { type: 'invalid_request', param: 'reasoning' });
  assertError(await c.post('/api/v1/chat', chat({ reasoning: 'extreme' })), 400, { param: 'reasoning' });
  const r = await c.post('/api/v1/chat', chat({ reasoning: 'off' }));
  assert.equal(r.status, 200, r.text);
  assert.ok(!r.json.output.some((o) => o.type === 'reasoning'));
});

test('20. streaming with a missing model: chat.start, error{invalid_request, param model}, chat.end', async (t) => {
  if (skip) return t.skip(skip);
  for (const p of PREFIXES) {
    const r = await c.sse(`${p}/chat`, { input: 'hi', stream: true });
    const names = r.events.map((e) => e.event);
    assert.deepEqual(names, ['chat.start', 'error', 'chat.end']);
    for (const e of r.events) assert.equal(e.data.type, e.event);
    const err = r.events[1].data.error;
    assert.equal(err.type, 'invalid_request');
    assert.equal(err.param, 'model');
    assert.equal(typeof err.message, 'string');
    assert.deepEqual(r.events[2].data.result.output, []);
  }
  // an unknown model, streamed: model_not_found in the error event
  const u = await c.sse('/api/v1/chat', chat({ model: 'nobody/nothing', stream: true }));
  assert.equal(u.events[1].data.error.type, 'model_not_found');
});

test('errors (non-streamed): missing model/input, bad types, unknown model, integrations, embedding model', async (t) => {
  if (skip) return t.skip(skip);
  const e = assertError(await c.post('/api/v1/chat', { input: 'hi' }), 400, { type: 'invalid_request', param: 'model' });
  assert.equal(e.code, 'missing_required_parameter');
  assertError(await c.post('/api/v1/chat', { model: MODEL }), 400, { param: 'input' });
  assertError(await c.post('/api/v1/chat', chat({ temperature: 'hot' })), 400, { param: 'temperature' });
  assertError(await c.post('/api/v1/chat', chat({ max_output_tokens: 0 })), 400, { param: 'max_output_tokens' });
  assertError(await c.post('/api/v1/chat', chat({ stream: 'yes' })), 400, { param: 'stream' });
  assertError(await c.post('/api/v1/chat', chat({ model: 'nobody/nothing' })), 404, { type: 'model_not_found' });
  assertError(await c.post('/api/v1/chat', chat({ integrations: ['mcp/playwright'] })), 501, { type: 'not_implemented' });
  assertError(await c.post('/api/v1/chat', '{"model":'), 400);
  if (!models.bertSkip) assertError(await c.post('/api/v1/chat', chat({ model: 'embed' })), 400, { param: 'model' });
});

test('22-24. load (context, echo_load_config), a second instance key:2, state in both listings, unload', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.post('/api/v1/models/load', { model: MODEL, context_length: 512, echo_load_config: true });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.type, 'llm');
  assert.equal(r.json.status, 'loaded');
  assert.equal(typeof r.json.load_time_seconds, 'number');
  const id1 = r.json.instance_id;
  assert.equal(typeof id1, 'string');
  assert.equal(r.json.model_instance_id, id1, 'both spellings of the id');
  assert.equal(r.json.load_config.context_length, 512);
  const ctx1 = 512;
  const r2 = await c.post('/lmstudio/v1/models/load', { model: MODEL });
  assert.equal(r2.status, 200, r2.text);
  const id2 = r2.json.instance_id;
  assert.notEqual(id2, id1);
  assert.match(id2, /:\d+$/);
  assert.equal(r2.json.load_config, undefined, 'load_config only with echo_load_config');
  const v1 = (await c.get('/api/v1/models')).json.models.find((m) => m.key === MODEL);
  const ids = v1.loaded_instances.map((i) => i.id);
  assert.ok(ids.includes(id1) && ids.includes(id2), JSON.stringify(ids));
  assert.equal(new Set(ids).size, ids.length, 'instance ids are unique');
  const inst1 = v1.loaded_instances.find((i) => i.id === id1);
  assert.equal(inst1.config.context_length, ctx1);
  const v0 = (await c.get('/api/v0/models/org/tiny')).json;
  assert.equal(v0.state, 'loaded');
  assert.ok(v0.loaded_context_length > 0);
  for (const [p, id] of [['/api/v1', id1], ['/lmstudio/v1', id2]]) {
    const u = await c.post(`${p}/models/unload`, { instance_id: id });
    assert.equal(u.status, 200, u.text);
    assert.deepEqual(u.json, { instance_id: id });
  }
  const after = (await c.get('/lmstudio/v1/models')).json.models.find((m) => m.key === MODEL);
  assert.ok(!after.loaded_instances.some((i) => i.id === id1 || i.id === id2));
  assertError(await c.post('/api/v1/models/unload', { instance_id: id1 }), 404);
  assertError(await c.post('/api/v1/models/unload', {}), 400, { param: 'instance_id' });
  assertError(await c.post('/api/v1/models/load', {}), 400, { param: 'model' });
  assertError(await c.post('/api/v1/models/load', { model: 'nobody/nothing' }), 404, { type: 'model_not_found' });
  assertError(await c.post('/api/v1/models/load', { model: MODEL, context_length: -4 }), 400, { param: 'context_length' });
  // chat's context_length applies when the chat loads the model
  for (const i of after.loaded_instances) assert.equal((await c.post('/api/v1/models/unload', { instance_id: i.id })).status, 200);
  const ch = await c.post('/api/v1/chat', chat({ context_length: 256 }));
  assert.equal(ch.status, 200, ch.text);
  assert.equal(typeof ch.json.stats.model_load_time_seconds, 'number');
  const now = (await c.get('/api/v1/models')).json.models.find((m) => m.key === MODEL);
  assert.deepEqual(now.loaded_instances.map((i) => i.config.context_length), [256]);
  assert.equal((await c.get('/api/v0/models/org/tiny')).json.loaded_context_length, 256);
});

test('25+26. download: an existing model is already_downloaded; status of jobs; unknown job', async (t) => {
  if (skip) return t.skip(skip);
  for (const p of PREFIXES) {
    const r = await c.post(`${p}/models/download`, { model: MODEL });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, 'already_downloaded');
    assert.equal(r.json.job_id, undefined);
    assertError(await c.post(`${p}/models/download`, {}), 400, { param: 'model' });
    const all = await c.get(`${p}/models/download/status`);
    assert.equal(all.status, 200);
    assert.ok(Array.isArray(all.json.jobs));
    assertError(await c.get(`${p}/models/download/status/job_doesnotexist`), 404, { type: 'job_not_found' });
  }
});

test('18. a reasoning model: reasoning item before the message, reasoning.* events, reasoning tokens; off turns it off', async (t) => {
  if (skip) return t.skip(skip);
  const m = (await c.get('/api/v1/models')).json.models.find((x) => x.key === THINKER);
  assert.ok(m.capabilities.reasoning, JSON.stringify(m.capabilities));
  assert.ok(m.capabilities.reasoning.allowed_options.includes('off'));
  assert.ok(m.capabilities.reasoning.allowed_options.includes(m.capabilities.reasoning.default));
  const r = await c.post('/api/v1/chat', chat({ model: THINKER, max_output_tokens: 6 }));
  assert.equal(r.status, 200, r.text);
  assertResult(r.json, { model: THINKER });
  assert.deepEqual(r.json.output.map((o) => o.type), ['reasoning', 'message']);
  assert.ok(r.json.output[0].content.length > 0);
  assert.ok(r.json.stats.reasoning_output_tokens > 0);
  assert.ok(r.json.stats.reasoning_output_tokens <= r.json.stats.total_output_tokens + 2);
  const s = await c.sse('/lmstudio/v1/chat', chat({ model: THINKER, max_output_tokens: 6, stream: true, reasoning: 'high' }));
  const res = assertStream(s, { load: false, model: THINKER });
  const names = s.events.map((e) => e.event);
  assert.ok(names.includes('reasoning.start') && names.includes('reasoning.delta') && names.includes('reasoning.end'));
  assert.equal(res.output[0].type, 'reasoning');
  const off = await c.post('/api/v1/chat', chat({ model: THINKER, reasoning: 'off' }));
  assert.equal(off.status, 200, off.text);
  assert.deepEqual(off.json.output.map((o) => o.type), ['message']);
  // v0 puts the thinking in reasoning_content
  const v0 = await c.post('/api/v0/chat/completions', { model: THINKER, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
  assert.equal(typeof v0.json.choices[0].message.reasoning_content, 'string');
  const v0s = await c.sse('/api/v0/chat/completions', { model: THINKER, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true });
  assert.ok(v0s.events.some((e) => typeof e.data === 'object' && e.data.choices[0]?.delta?.reasoning_content));
});
