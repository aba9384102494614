// v0.test.mjs - LM Studio REST API v0 over plain HTTP against a tiny
// generated model (spec ../shared/specs/lmstudio.md section 1 and
// conformance checks 2-12, 28). The model is random-weight: the tests check
// shapes, limits and invariants, never what the text says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';
import { client, assertError } from './lib.mjs';

const MODEL = 'org/tiny';
let srv, models, skip, c;

before(async () => {
  models = await makeModelsDir({ bert: true, hermes: true });
  if (models.skip) { skip = models.skip; return; }
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

const chat = (extra = {}) => ({
  model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 6, temperature: 0, ...extra,
});

// Zed's strict struct for a v0 model entry (closed enums).
function assertV0Model(m) {
  assert.equal(typeof m.id, 'string');
  assert.equal(m.object, 'model');
  assert.ok(['llm', 'vlm', 'embeddings'].includes(m.type), m.type);
  assert.equal(typeof m.publisher, 'string');
  assert.equal(typeof m.arch, 'string');
  assert.ok(['gguf', 'mlx'].includes(m.compatibility_type), m.compatibility_type);
  assert.equal(typeof m.quantization, 'string');
  assert.ok(['loaded', 'not-loaded', 'loading'].includes(m.state), m.state);
  assert.ok(Number.isInteger(m.max_context_length));
  assert.ok(Array.isArray(m.capabilities));
  for (const cap of m.capabilities) assert.equal(typeof cap, 'string');
  if (m.state === 'loaded') assert.ok(Number.isInteger(m.loaded_context_length) && m.loaded_context_length > 0);
  else assert.equal(m.loaded_context_length, undefined);
}

function assertExtras(b) {
  for (const k of ['tokens_per_second', 'time_to_first_token', 'generation_time']) {
    assert.equal(typeof b.stats[k], 'number', k);
    assert.ok(b.stats[k] >= 0, k);
  }
  assert.ok(['eosFound', 'stopStringFound', 'maxPredictedTokensReached', 'contextLengthReached', 'toolCalls',
    'userStopped', 'failed'].includes(b.stats.stop_reason), b.stats.stop_reason);
  assert.equal(b.model_info.arch, 'llama');
  assert.equal(typeof b.model_info.quant, 'string');
  assert.equal(b.model_info.format, 'gguf');
  assert.equal(b.model_info.context_length, 1024);
  assert.equal(typeof b.runtime.name, 'string');
  assert.equal(typeof b.runtime.version, 'string');
  assert.deepEqual(b.runtime.supported_formats, ['gguf']);
  assert.equal(b.usage.total_tokens, b.usage.prompt_tokens + b.usage.completion_tokens);
}

test('28. GET /lmstudio-greeting says lmstudio: true', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.get('/lmstudio-greeting');
  assert.equal(r.status, 200);
  assert.equal(r.json.lmstudio, true);
});

test('2+3+4. GET /api/v0/models lists every model with the strict v0 fields, nothing loaded yet', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.get('/api/v0/models');
  assert.equal(r.status, 200);
  assert.equal(r.json.object, 'list');
  for (const m of r.json.data) assertV0Model(m);
  const tiny = r.json.data.find((m) => m.id === MODEL);
  assert.ok(tiny, r.text);
  assert.equal(tiny.type, 'llm');
  assert.equal(tiny.publisher, 'org');
  assert.equal(tiny.arch, 'llama');
  assert.equal(tiny.state, 'not-loaded');
  assert.equal(tiny.max_context_length, 1024);
  assert.ok(tiny.capabilities.includes('tool_use'), 'the template takes tools');
  if (!models.bertSkip) {
    const emb = r.json.data.find((m) => m.id === 'embed');
    assert.equal(emb.type, 'embeddings');
  }
});

test('5. GET /api/v0/models/{id}: raw and encoded slashes give the list entry; unknown is 404', async (t) => {
  if (skip) return t.skip(skip);
  const list = (await c.get('/api/v0/models')).json.data;
  for (const p of ['/api/v0/models/org/tiny', '/api/v0/models/org%2Ftiny']) {
    const r = await c.get(p);
    assert.equal(r.status, 200, p);
    assert.deepEqual(r.json, list.find((m) => m.id === MODEL));
  }
  assertError(await c.get('/api/v0/models/no-such-model'), 404, { type: 'model_not_found' });
});

test('6+7. chat completion: OpenAI fields plus stats, model_info, runtime; max_tokens ends with length', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.post('/api/v0/chat/completions', chat({ max_tokens: 4 }));
  assert.equal(r.status, 200, r.text);
  const b = r.json;
  assert.match(b.id, /^chatcmpl-/);
  assert.equal(b.object, 'chat.completion');
  assert.ok(Number.isInteger(b.created));
  assert.equal(b.model, MODEL);
  assert.equal(b.choices.length, 1);
  assert.equal(b.choices[0].index, 0);
  assert.equal(b.choices[0].logprobs, null);
  assert.equal(b.choices[0].message.role, 'assistant');
  assert.equal(typeof b.choices[0].message.content, 'string');
  assert.equal(b.choices[0].finish_reason, 'length');
  assert.equal(b.stats.stop_reason, 'maxPredictedTokensReached');
  assert.equal(b.usage.completion_tokens, 4);
  assertExtras(b);
  // the model is loaded now: v0 says so, with the loaded context
  const m = (await c.get('/api/v0/models/org/tiny')).json;
  assertV0Model(m);
  assert.equal(m.state, 'loaded');
  assert.equal(m.loaded_context_length, 1024);
});

test('stats timings are the engine\'s: first token to last, the rate over the tokens after the first', async (t) => {
  if (skip) return t.skip(skip);
  // one token: no span, no rate (a wake-up of the handler is not a measurement)
  const one = await c.post('/api/v0/chat/completions', chat({ max_tokens: 1 }));
  assert.equal(one.status, 200, one.text);
  assert.equal(one.json.usage.completion_tokens, 1);
  assert.equal(one.json.stats.generation_time, 0);
  assert.equal(one.json.stats.tokens_per_second, 0);
  for (const [path, body] of [['/api/v0/chat/completions', chat({ max_tokens: 6 })],
    ['/api/v0/completions', { model: MODEL, prompt: 'Once upon', max_tokens: 6, temperature: 0 }]]) {
    const t0 = performance.now();
    const r = await c.post(path, body);
    const wall = (performance.now() - t0) / 1000;
    assert.equal(r.status, 200, r.text);
    const { stats, usage } = r.json;
    assert.ok(stats.time_to_first_token + stats.generation_time <= wall, JSON.stringify(stats));
    if (usage.completion_tokens < 2) continue; // the random model ended at once
    assert.ok(stats.generation_time > 0, JSON.stringify(stats));
    // the tokens after the first, over the span they took
    const made = stats.tokens_per_second * stats.generation_time;
    assert.ok(Math.abs(made - (usage.completion_tokens - 1)) < 1e-3 * usage.completion_tokens,
      `${path}: ${JSON.stringify(stats)} for ${usage.completion_tokens} tokens`);
  }
});

test('7. max_tokens -1 means unlimited; a stop string ends with stopStringFound or another natural reason', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.post('/api/v0/chat/completions', chat({ max_tokens: -1, stop: ['a', 'e', 'o', ' '] }));
  assert.equal(r.status, 200, r.text);
  assert.notEqual(r.json.stats.stop_reason, 'maxPredictedTokensReached');
  if (r.json.choices[0].finish_reason === 'stop') assert.ok(['stopStringFound', 'eosFound'].includes(r.json.stats.stop_reason));
  assertError(await c.post('/api/v0/chat/completions', chat({ max_tokens: 0 })), 400, { param: 'max_tokens' });
});

test('8. streaming: OpenAI chunks, role first, finish last, [DONE], same text as non-streamed', async (t) => {
  if (skip) return t.skip(skip);
  const full = (await c.post('/api/v0/chat/completions', chat({ max_tokens: 8 }))).json;
  const r = await c.sse('/api/v0/chat/completions', chat({ max_tokens: 8, stream: true }));
  assert.equal(r.status, 200);
  const ev = r.events;
  assert.equal(ev.at(-1).data, '[DONE]');
  const chunks = ev.slice(0, -1).map((e) => e.data);
  assert.ok(chunks.length >= 3);
  let text = '';
  const ids = new Set();
  chunks.forEach((ch, i) => {
    assert.equal(ev[i].event, null, 'v0 streams unnamed data events');
    for (const k of ['id', 'object', 'created', 'model', 'system_fingerprint', 'choices']) assert.ok(k in ch, k);
    assert.equal(ch.object, 'chat.completion.chunk');
    assert.equal(ch.stats, undefined, '0.3.x streams carry no stats');
    ids.add(ch.id);
    const choice = ch.choices[0];
    for (const k of ['index', 'delta', 'logprobs', 'finish_reason']) assert.ok(k in choice, k);
    if (i === 0) assert.equal(choice.delta.role, 'assistant');
    if (i < chunks.length - 1) assert.equal(choice.finish_reason, null);
    text += choice.delta.content || '';
  });
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  assert.equal(ids.size, 1);
  assert.equal(text, full.choices[0].message.content);
});

test('8. stream_options.include_usage adds one usage chunk with empty choices before [DONE]', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.sse('/api/v0/chat/completions', chat({ stream: true, stream_options: { include_usage: true } }));
  const last = r.events.at(-2).data;
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
  assert.equal(last.usage.completion_tokens, 6);
});

test('9. tools: the request is accepted with tool_choice; any tool call has string arguments', async (t) => {
  if (skip) return t.skip(skip);
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  for (const tool_choice of ['auto', 'required', 'none']) {
    const r = await c.post('/api/v0/chat/completions', chat({ tools, tool_choice }));
    assert.equal(r.status, 200, r.text);
    const m = r.json.choices[0].message;
    for (const call of m.tool_calls || []) {
      assert.equal(call.type, 'function');
      assert.equal(typeof call.function.arguments, 'string');
      assert.equal(r.json.choices[0].finish_reason, 'tool_calls');
    }
  }
  assertError(await c.post('/api/v0/chat/completions', chat({ tools, tool_choice: 'sometimes' })), 400, { param: 'tool_choice' });
  assertError(await c.post('/api/v0/chat/completions',
    chat({ tools, tool_choice: { type: 'function', function: { name: 'no_such_tool' } } })), 400, { param: 'tool_choice' });
  assertError(await c.post('/api/v0/chat/completions', chat({ tools: [{ type: 'function' }] })), 400,
    { param: 'tools[0].function.name' });
});

test('LM Studio sampling extras are accepted and checked: top_k, min_p, repeat_penalty, ttl, draft_model', async (t) => {
  if (skip) return t.skip(skip);
  const ok = await c.post('/api/v0/chat/completions',
    chat({ top_k: 40, min_p: 0.05, repeat_penalty: 1.1, ttl: 300, draft_model: 'org/tiny', seed: 3 }));
  assert.equal(ok.status, 200, ok.text);
  assertError(await c.post('/api/v0/chat/completions', chat({ top_k: -1 })), 400, { param: 'top_k' });
  assertError(await c.post('/api/v0/chat/completions', chat({ min_p: 2 })), 400, { param: 'min_p' });
  assertError(await c.post('/api/v0/chat/completions', chat({ repeat_penalty: 'x' })), 400, { param: 'repeat_penalty' });
  assertError(await c.post('/api/v0/chat/completions', chat({ temperature: 5 })), 400, { param: 'temperature' });
});

test('10. a stream request refused before streaming answers a plain error object (no stream opens)', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.post('/api/v0/chat/completions', chat({ stream: true, messages: [] }));
  assertError(r, 400, { param: 'messages' });
});

test('11. completions: text_completion with the three extra objects; stop as a string; streamed chunks', async (t) => {
  if (skip) return t.skip(skip);
  const r = await c.post('/api/v0/completions', { model: MODEL, prompt: 'Once upon a time', max_tokens: 5, temperature: 0, stop: '\n\n\n' });
  assert.equal(r.status, 200, r.text);
  const b = r.json;
  assert.match(b.id, /^cmpl-/);
  assert.equal(b.object, 'text_completion');
  assert.equal(typeof b.choices[0].text, 'string');
  assert.equal(b.choices[0].logprobs, null);
  assert.equal(b.choices[0].finish_reason, 'length');
  assert.equal(b.stats.stop_reason, 'maxPredictedTokensReached');
  assertExtras(b);
  const s = await c.sse('/api/v0/completions', { model: MODEL, prompt: 'Once upon a time', max_tokens: 5, temperature: 0, stream: true });
  assert.equal(s.events.at(-1).data, '[DONE]');
  const text = s.events.slice(0, -1).map((e) => { assert.equal(e.data.object, 'text_completion'); return e.data.choices[0].text; }).join('');
  assert.equal(text, b.choices[0].text);
  assertError(await c.post('/api/v0/completions', { model: MODEL }), 400, { param: 'prompt' });
});

test('12. embeddings: string and array input, one item per input with its index', async (t) => {
  if (skip || models.bertSkip) return t.skip(skip || models.bertSkip);
  const one = await c.post('/api/v0/embeddings', { model: 'embed', input: 'hello world' });
  assert.equal(one.status, 200, one.text);
  assert.equal(one.json.object, 'list');
  assert.equal(one.json.data.length, 1);
  assert.equal(one.json.data[0].object, 'embedding');
  assert.equal(one.json.data[0].index, 0);
  assert.ok(one.json.data[0].embedding.length > 0);
  assert.equal(typeof one.json.model, 'string');
  for (const k of ['prompt_tokens', 'total_tokens']) assert.ok(Number.isInteger(one.json.usage[k]));
  const many = await c.post('/api/v0/embeddings', { model: 'embed', input: ['a', 'b', 'c'] });
  assert.deepEqual(many.json.data.map((d) => d.index), [0, 1, 2]);
  // a chat model does not embed; a bad input names the field
  assertError(await c.post('/api/v0/embeddings', { model: 'embed', input: 3 }), 400, { param: 'input' });
});

test('errors: bad JSON, unknown model, bad messages, images on a text model - all in the error object shape', async (t) => {
  if (skip) return t.skip(skip);
  assertError(await c.post('/api/v0/chat/completions', '{"model": tru'), 400);
  assertError(await c.post('/api/v0/chat/completions', chat({ model: 'nope/none' })), 404, { type: 'model_not_found', param: 'model' });
  assertError(await c.post('/api/v0/chat/completions', chat({ messages: [{ role: 'wizard', content: 'x' }] })), 400,
    { param: 'messages[0].role' });
  assertError(await c.post('/api/v0/chat/completions', chat({
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }],
  })), 400, { param: 'messages[0].content[0]' });
  assertError(await c.post('/api/v0/chat/completions', chat({ response_format: { type: 'xml' } })), 400,
    { param: 'response_format.type' });
});

test('13. ttl on a request that loads the model just in time: it unloads after that many idle seconds', async (t) => {
  if (skip) return t.skip(skip);
  const u = await c.post('/api/v1/models/unload', { instance_id: MODEL });
  assert.equal(u.status, 200, u.text);
  assert.equal((await c.get('/api/v0/models/org/tiny')).json.state, 'not-loaded');
  const r = await c.post('/api/v0/chat/completions', chat({ ttl: 1, max_tokens: 2 }));
  assert.equal(r.status, 200, r.text);
  assert.equal((await c.get('/api/v0/models/org/tiny')).json.state, 'loaded');
  let state = 'loaded';
  for (let i = 0; i < 40 && state === 'loaded'; i++) {
    await new Promise((res) => setTimeout(res, 250));
    state = (await c.get('/api/v0/models/org/tiny')).json.state;
  }
  assert.equal(state, 'not-loaded', 'still loaded 10 s after a ttl of 1 s');
  assertError(await c.post('/api/v0/chat/completions', chat({ ttl: 'soon' })), 400, { param: 'ttl' });
});

test('9. forced tool calls (a Hermes-family model): tool_calls with string arguments, finish tool_calls, toolCalls; streamed incrementally', async (t) => {
  if (skip || models.hermesSkip) return t.skip(skip || models.hermesSkip);
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'],
      additionalProperties: false } } }];
  const req = { model: 'org/hermes', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, max_tokens: 120, seed: 1 };
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const r = await c.post('/api/v0/chat/completions', { ...req, tool_choice });
    assert.equal(r.status, 200, r.text);
    const ch = r.json.choices[0];
    assert.equal(ch.finish_reason, 'tool_calls', r.text);
    assert.equal(r.json.stats.stop_reason, 'toolCalls');
    const call = ch.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof call.function.arguments, 'string');
    assert.equal(typeof JSON.parse(call.function.arguments), 'object');
  }
  const s = await c.sse('/api/v0/chat/completions', { ...req, tool_choice: 'required', stream: true });
  const chunks = s.events.slice(0, -1).map((e) => e.data);
  const deltas = chunks.flatMap((ch) => ch.choices[0].delta.tool_calls || []);
  {
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls', JSON.stringify(chunks.at(-1)));
    assert.ok(deltas.length >= 1);
    assert.equal(deltas[0].index, 0);
    assert.equal(typeof deltas[0].id, 'string');
    assert.equal(deltas[0].function.name, 'get_weather');
    const args = deltas.map((d) => d.function?.arguments || '').join('');
    assert.equal(typeof JSON.parse(args), 'object');
  }
});
