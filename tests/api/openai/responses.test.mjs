// responses.test.mjs - the Responses and Conversations APIs through the
// official `openai` SDK (spec ../shared/specs/openai.md section 4): create,
// the responses.stream() helper (whose accumulator checks the event order and
// indexes), retrieve and its event replay, input_items paging, input token
// counting, previous_response_id across a server restart, background
// responses and cancel, deletion, conversations, and the errors. The model is
// random-weight: shapes and invariants are checked, not text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, parseSSE } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const MODEL = 'org/tiny';
let srv, client, models, skip, dataDir;

const serverArgs = () => ['--models-dir', models.dir, '--default-model', MODEL, '--parallel', '2', '--data-dir', dataDir];
async function start() {
  srv = await startServer({ args: serverArgs(), env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
}

before(async () => {
  models = await makeModelsDir({});
  if (models.skip) { skip = models.skip; return; }
  dataDir = mkdtempSync(path.join(tmpdir(), 'parley-resp-'));
  await start();
});
after(async () => {
  if (srv) await srv.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (models?.cleanup) models.cleanup();
});

function checkResponse(r) {
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  assert.ok(Number.isInteger(r.created_at));
  for (const k of ['error', 'incomplete_details', 'instructions', 'model', 'tools', 'output', 'parallel_tool_calls',
    'metadata', 'tool_choice', 'temperature', 'top_p']) assert.ok(k in r, `missing ${k}`);
  assert.ok(r.output.length >= 1);
  const ids = new Set();
  for (const it of r.output) {
    assert.ok(it.id && !ids.has(it.id), 'output item ids must be unique and present');
    ids.add(it.id);
  }
  const msg = r.output.find((o) => o.type === 'message');
  if (msg) {
    assert.match(msg.id, /^msg_/);
    assert.equal(msg.role, 'assistant');
    assert.equal(msg.content[0].type, 'output_text');
  }
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  if (r.status === 'incomplete') {
    assert.equal(r.incomplete_details.reason, 'max_output_tokens');
    // the item the limit cut short says so too
    assert.equal(r.output.at(-1).status, 'incomplete', JSON.stringify(r.output.at(-1)));
  }
}

test('create: a string input gives a stored response with a message item and usage', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.responses.create({ model: MODEL, input: 'Hello there', max_output_tokens: 16, temperature: 0,
    metadata: { k: 'v' } });
  checkResponse(r);
  assert.equal(r.metadata.k, 'v');
  assert.equal(r.store, true);
  assert.equal(typeof r.output_text, 'string');
  const again = await client.responses.retrieve(r.id);
  assert.equal(again.id, r.id);
  assert.deepEqual(again.output, r.output);
});

test('stream: the SDK helper accumulates the events into the final response', async (t) => {
  if (skip) return t.skip(skip);
  const stream = client.responses.stream({ model: MODEL, input: 'Tell me', max_output_tokens: 20, temperature: 0 });
  const seen = [];
  for await (const ev of stream) seen.push(ev);
  const final = await stream.finalResponse();
  checkResponse(final);
  assert.equal(seen[0].type, 'response.created');
  assert.equal(seen[1].type, 'response.in_progress');
  assert.ok(['response.completed', 'response.incomplete'].includes(seen.at(-1).type));
  seen.forEach((ev, i) => assert.equal(ev.sequence_number, i));
  const text = seen.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  const msg = final.output.find((o) => o.type === 'message');
  assert.equal(text, msg.content[0].text);
  // The stored copy equals what the stream ended with.
  const stored = await client.responses.retrieve(final.id);
  assert.equal(stored.output_text, final.output_text);
  assert.deepEqual(stored.output.map((o) => o.id), final.output.map((o) => o.id));
});

test('retrieve with stream=true replays the events after starting_after', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.responses.create({ model: MODEL, input: 'Replay me', max_output_tokens: 16, temperature: 0 });
  const res = await fetch(`${srv.url}/v1/responses/${r.id}?stream=true&starting_after=1`);
  assert.equal(res.status, 200);
  const events = parseSSE(await res.text()).events.map((e) => JSON.parse(e.data));
  assert.equal(events[0].sequence_number, 2);
  assert.equal(events[0].type, 'response.output_item.added');
  assert.equal(events.at(-1).response.id, r.id);
});

test('input_items: ids, newest first by default, paging with limit and after', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.responses.create({ model: MODEL, max_output_tokens: 16, input: [
    { role: 'user', content: 'first' },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'second' }] },
    { role: 'user', content: 'third' },
  ] });
  const all = await client.responses.inputItems.list(r.id);
  assert.equal(all.data.length, 3);
  assert.ok(all.data.every((it) => typeof it.id === 'string' && it.id.length > 0));
  assert.equal(all.data[0].content[0].text, 'third');
  const page = await client.responses.inputItems.list(r.id, { limit: 1, order: 'asc' });
  assert.equal(page.data.length, 1);
  assert.equal(page.has_more, true);
  assert.equal(page.data[0].content[0].text, 'first');
  const next = await client.responses.inputItems.list(r.id, { limit: 1, order: 'asc', after: page.data[0].id });
  assert.equal(next.data[0].content[0].text, 'second');
});

test('input_tokens counts exactly what create reports as input_tokens', async (t) => {
  if (skip) return t.skip(skip);
  const body = { model: MODEL, input: 'Count these tokens please', instructions: 'Be brief.' };
  const count = await client.responses.inputTokens.count(body);
  assert.equal(count.object, 'response.input_tokens');
  const r = await client.responses.create({ ...body, max_output_tokens: 16 });
  assert.equal(count.input_tokens, r.usage.input_tokens);
});

test('previous_response_id rebuilds the conversation, also after a restart', async (t) => {
  if (skip) return t.skip(skip);
  const first = await client.responses.create({ model: MODEL, input: 'Remember this', max_output_tokens: 16, temperature: 0 });
  const second = await client.responses.create({ model: MODEL, input: 'And this', previous_response_id: first.id,
    max_output_tokens: 16, temperature: 0 });
  assert.equal(second.previous_response_id, first.id);
  assert.ok(second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens - 2,
    `${second.usage.input_tokens} vs ${first.usage.input_tokens}+${first.usage.output_tokens}`);
  await srv.stop();
  await start();
  const third = await client.responses.create({ model: MODEL, input: 'And this', previous_response_id: first.id,
    max_output_tokens: 16, temperature: 0 });
  assert.equal(third.usage.input_tokens, second.usage.input_tokens);
  assert.equal((await client.responses.retrieve(second.id)).id, second.id);
});

test('background: queued at once, completes, cancel answers the stored response', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.responses.create({ model: MODEL, input: 'In the background', background: true, max_output_tokens: 16 });
  assert.equal(r.status, 'queued');
  assert.equal(r.background, true);
  let cur = r;
  for (let i = 0; i < 200 && ['queued', 'in_progress'].includes(cur.status); i++) {
    await new Promise((res) => setTimeout(res, 50));
    cur = await client.responses.retrieve(r.id);
  }
  checkResponse(cur);
  const cancelled = await client.responses.cancel(r.id);
  assert.equal(cancelled.id, r.id);
  const plain = await client.responses.create({ model: MODEL, input: 'x', max_output_tokens: 16 });
  await assert.rejects(client.responses.cancel(plain.id), (e) => e instanceof OpenAI.BadRequestError);
});

test('delete removes a response; later reads are NotFound', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.responses.create({ model: MODEL, input: 'Delete me', max_output_tokens: 16 });
  await client.responses.delete(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.responses.delete(r.id), (e) => e instanceof OpenAI.NotFoundError);
});

test('function tools and text.format json_schema are honoured; hosted tools are accepted and not shown', async (t) => {
  if (skip) return t.skip(skip);
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather', strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
  const withTools = await client.responses.create({ model: MODEL, input: 'Weather in Oslo?', tools, max_output_tokens: 16 });
  assert.deepEqual(withTools.tools, tools);
  // FunctionTool requires strict and parameters: echoed true and null when
  // left out, in the stream's response objects too.
  const bare = { type: 'function', name: 'ping' };
  const echoed = await client.responses.create({ model: MODEL, input: 'x', tools: [bare], max_output_tokens: 1 });
  assert.deepEqual(echoed.tools, [{ ...bare, strict: true, parameters: null }]);
  const es = client.responses.stream({ model: MODEL, input: 'x', tools: [bare], max_output_tokens: 1 });
  for await (const ev of es) if (ev.response) assert.deepEqual(ev.response.tools, [{ ...bare, strict: true, parameters: null }], ev.type);
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
  const fmt = await client.responses.create({ model: MODEL, input: 'ok?', max_output_tokens: 64, temperature: 1,
    text: { format: { type: 'json_schema', name: 'ok', schema, strict: true } } });
  assert.equal(fmt.status, 'completed');
  assert.equal(typeof JSON.parse(fmt.output_text).ok, 'boolean');
  // A hosted tool is accepted, echoed, and left out of the prompt.
  const plain = await client.responses.inputTokens.count({ model: MODEL, input: 'x' });
  const hosted = await client.responses.inputTokens.count({ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] });
  assert.equal(hosted.input_tokens, plain.input_tokens);
  const ws = await client.responses.create({ model: MODEL, input: 'x', tools: [{ type: 'web_search' }], max_output_tokens: 4 });
  assert.deepEqual(ws.tools, [{ type: 'web_search' }]);
  // A function call and its output as input render without error.
  const round = await client.responses.create({ model: MODEL, tools, max_output_tokens: 16, input: [
    { role: 'user', content: 'Weather in Oslo?' },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
    { type: 'function_call_output', call_id: 'call_1', output: '{"temp":3}' },
  ] });
  checkResponse(round);
});

test('max_output_tokens: every positive value, 1 included (a warm-up request)', async (t) => {
  if (skip) return t.skip(skip);
  for (const n of [1, 3, 15]) {
    const r = await client.responses.create({ model: MODEL, input: 'warm up', max_output_tokens: n });
    assert.equal(r.max_output_tokens, n);
    assert.ok(r.usage.output_tokens <= n, `${r.usage.output_tokens} > ${n}`);
    if (r.status === 'incomplete') assert.equal(r.output.at(-1).status, 'incomplete');
  }
  // streamed, the item's done event carries the status as well
  const s = client.responses.stream({ model: MODEL, input: 'warm up', max_output_tokens: 1 });
  const done = [];
  for await (const ev of s) if (ev.type === 'response.output_item.done') done.push(ev.item);
  const final = await s.finalResponse();
  assert.equal(final.status, 'incomplete');
  assert.equal(done.at(-1).status, 'incomplete');
  assert.equal(final.output.at(-1).status, 'incomplete');
});

test('bad requests name the field', async (t) => {
  if (skip) return t.skip(skip);
  const cases = [
    [{ model: MODEL }, 'input'],
    [{ model: MODEL, input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
    [{ model: MODEL, input: 'x', tools: [{ type: 'web_serch' }] }, 'tools'],
    [{ model: MODEL, input: [{ type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'data:,' }] }] }, 'input'],
    [{ model: MODEL, input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type'],
    [{ model: MODEL, input: 'x', previous_response_id: 'resp_x', conversation: 'conv_x' }, 'previous_response_id'],
  ];
  for (const [body, param] of cases) {
    await assert.rejects(client.responses.create(body), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(body)}: ${e}`);
      assert.equal(e.param, param);
      return true;
    });
  }
  await assert.rejects(client.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_nope' }),
    (e) => e instanceof OpenAI.NotFoundError);
});

test('conversations: create, use from a response, list/get/delete items, update, delete', async (t) => {
  if (skip) return t.skip(skip);
  const conv = await client.conversations.create({ metadata: { topic: 'demo' },
    items: [{ type: 'message', role: 'user', content: 'Hi from the start' }] });
  assert.match(conv.id, /^conv_/);
  assert.equal(conv.object, 'conversation');
  assert.equal(conv.metadata.topic, 'demo');
  const r = await client.responses.create({ model: MODEL, conversation: conv.id, input: 'Go on', max_output_tokens: 16 });
  assert.equal(r.conversation.id, conv.id);
  const items = await client.conversations.items.list(conv.id, { order: 'asc' });
  assert.equal(items.data.length, 2 + r.output.length);
  // output_text parts need annotations and logprobs (both required), also
  // in items the client added without them.
  const asst = await client.conversations.items.create(conv.id, { items: [
    { role: 'assistant', content: 'said before' },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'parts form' }] },
  ] });
  const listed = await client.conversations.items.list(conv.id, { order: 'asc' });
  const parts = listed.data.filter((it) => it.type === 'message').flatMap((it) => it.content)
    .filter((p) => p.type === 'output_text');
  assert.ok(parts.length >= 3, JSON.stringify(listed.data));
  for (const p of parts) {
    assert.ok(Array.isArray(p.annotations), JSON.stringify(p));
    assert.ok(Array.isArray(p.logprobs), JSON.stringify(p));
  }
  for (const it of asst.data) await client.conversations.items.delete(it.id, { conversation_id: conv.id });
  assert.equal(items.data[1].content[0].text, 'Go on');
  const one = await client.conversations.items.retrieve(items.data[0].id, { conversation_id: conv.id });
  assert.equal(one.id, items.data[0].id);
  const second = await client.responses.create({ model: MODEL, conversation: conv.id, input: 'More', max_output_tokens: 16 });
  assert.ok(second.usage.input_tokens > r.usage.input_tokens);
  const added = await client.conversations.items.create(conv.id, { items: [{ role: 'user', content: 'added' }] });
  assert.equal(added.data.length, 1);
  const afterDel = await client.conversations.items.delete(added.data[0].id, { conversation_id: conv.id });
  assert.equal(afterDel.id, conv.id);
  const upd = await client.conversations.update(conv.id, { metadata: { topic: 'changed' } });
  assert.equal(upd.metadata.topic, 'changed');
  const del = await client.conversations.delete(conv.id);
  assert.equal(del.deleted, true);
  await assert.rejects(client.conversations.retrieve(conv.id), (e) => e instanceof OpenAI.NotFoundError);
});
