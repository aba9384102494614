// messages.test.mjs - POST /v1/messages and /v1/messages/count_tokens through
// the official @anthropic-ai/sdk against the real binary with generated
// random-weight models (spec ../shared/specs/anthropic.md section 6, checks
// 1-8, 11-13, 15-25, 28, 31). The models' text is noise: the tests
// check shapes, event order, limits and invariants, never what the text says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { parseSSE } from '../lib/server.mjs';
import { setup, post, WEATHER_TOOL, TIME_TOOL, FORCE_WEATHER_CALL } from './setup.mjs';

const TINY = 'org/tiny', THINK = 'org/think';
let env, client, skip;

before(async () => {
  env = await setup({ hermes: true });
  if (env.skip) { skip = env.skip; return; }
  client = new Anthropic({ baseURL: env.srv.url, apiKey: 'anything', maxRetries: 0 });
});
after(async () => { if (env?.teardown) await env.teardown(); });

const req = (extra = {}) => ({
  model: TINY, max_tokens: 8, temperature: 0, messages: [{ role: 'user', content: 'Hi' }], ...extra,
});
const unique = () => `note ${Math.random().toString(36).slice(2)} ${Date.now()}`;

test('1-3. messages.create: Message shape, usage and request id', async (t) => {
  if (skip) return t.skip(skip);
  const m = await client.messages.create(req({ max_tokens: 64, temperature: 1 }));
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_[0-9a-f]{24}$/);
  assert.equal(m.model, TINY);
  assert.equal(m.content[0].type, 'text');
  assert.equal(typeof m.content[0].text, 'string');
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.equal(m.stop_sequence, null);
  assert.ok(m.usage.input_tokens + m.usage.cache_read_input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 64);
  assert.equal(m.usage.cache_creation_input_tokens, 0);
  assert.equal(typeof m.usage.cache_read_input_tokens, 'number');
  assert.match(m._request_id, /^req_[0-9a-f]{32}$/);
});

test('4. system as a string and as text blocks render the same prompt and reply', async (t) => {
  if (skip) return t.skip(skip);
  const a = await client.messages.create(req({ system: 'You are terse.', max_tokens: 6 }));
  const b = await client.messages.create(req({ system: [{ type: 'text', text: 'You are terse.' }], max_tokens: 6 }));
  const none = await client.messages.countTokens({ model: TINY, messages: req().messages });
  const ca = await client.messages.countTokens({ model: TINY, messages: req().messages, system: 'You are terse.' });
  const cb = await client.messages.countTokens({ model: TINY, messages: req().messages, system: [{ type: 'text', text: 'You are terse.' }] });
  assert.equal(ca.input_tokens, cb.input_tokens);
  assert.ok(ca.input_tokens > none.input_tokens, 'the system prompt is rendered');
  assert.equal(a.content[0].text, b.content[0].text, 'temperature 0: same prompt, same reply');
});

test('5. max_tokens 1 stops with max_tokens after one token', async (t) => {
  if (skip) return t.skip(skip);
  const m = await client.messages.create(req({ max_tokens: 1 }));
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 1);
});

test('6. stop_sequences: stop_reason stop_sequence, the matched string, text cut before it', async (t) => {
  if (skip) return t.skip(skip);
  const base = await client.messages.create(req({ max_tokens: 24 }));
  const text = base.content[0].text;
  // a piece of the greedy reply that first occurs after a few characters
  let stop = null;
  for (let i = 4; i + 3 <= text.length && !stop; i++) {
    const s = text.slice(i, i + 3);
    if (s.trim().length === 3 && text.indexOf(s) === i) stop = s;
  }
  if (!stop) return t.skip(`the greedy reply ${JSON.stringify(text)} has no usable stop string`);
  const m = await client.messages.create(req({ max_tokens: 24, stop_sequences: ['@@never@@', stop] }));
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
  assert.ok(!m.content[0].text.includes(stop));
  assert.ok(text.startsWith(m.content[0].text));
});

test('7. max_tokens missing: 400 invalid_request_error naming the field, with request ids', async (t) => {
  if (skip) return t.skip(skip);
  const r = await post(env.srv.url, '/v1/messages', { model: TINY, messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(r.status, 400);
  assert.equal(r.body.type, 'error');
  assert.equal(r.body.error.type, 'invalid_request_error');
  assert.match(r.body.error.message, /max_tokens/);
  assert.match(r.headers.get('request-id'), /^req_/);
  assert.equal(r.body.request_id, r.headers.get('request-id'));
  // the SDK path: BadRequestError with the type and the request id
  await assert.rejects(client.messages.create({ ...req(), max_tokens: 0 }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.type, 'invalid_request_error');
    assert.match(e.requestID, /^req_/);
    return true;
  });
});

test('8. unknown model: NotFoundError not_found_error naming the model', async (t) => {
  if (skip) return t.skip(skip);
  await assert.rejects(client.messages.create(req({ model: 'claude-sonnet-4-5' })), (e) => {
    assert.ok(e instanceof Anthropic.NotFoundError);
    assert.equal(e.type, 'not_found_error');
    assert.match(e.error.error.message, /claude-sonnet-4-5/);
    assert.match(e.requestID, /^req_/);
    return true;
  });
});

test('11+13. stream: true yields every event in order; raw SSE has named events and a ping', async (t) => {
  if (skip) return t.skip(skip);
  const stream = await client.messages.create(req({ max_tokens: 6, stream: true }));
  const types = [];
  for await (const ev of stream) types.push(ev.type);
  assert.equal(types[0], 'message_start');
  assert.equal(types[1], 'content_block_start');
  assert.ok(types.includes('content_block_delta'));
  assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(types.filter((x) => x === 'message_start').length, 1);

  const r = await post(env.srv.url, '/v1/messages', req({ max_tokens: 4, stream: true }));
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  assert.match(r.headers.get('request-id'), /^req_/);
  assert.ok(r.text.includes('event: ping\ndata: {"type": "ping"}\n\n'));
  const { events } = parseSSE(r.text);
  for (const e of events) {
    assert.ok(e.event, `data-only event: ${e.data}`);
    assert.equal(JSON.parse(e.data).type, e.event);
  }
  assert.ok(!r.text.includes('[DONE]'));
});

test('12. messages.stream: text events join to finalMessage text; usage from the last message_delta', async (t) => {
  if (skip) return t.skip(skip);
  const s = client.messages.stream(req({ max_tokens: 12, temperature: 1 }));
  let text = '';
  let lastDelta = null;
  s.on('text', (d) => { text += d; });
  s.on('streamEvent', (e) => { if (e.type === 'message_delta') lastDelta = e; });
  const final = await s.finalMessage();
  assert.equal(final.content[0].type, 'text');
  assert.equal(final.content[0].text, text);
  assert.equal(final.usage.output_tokens, lastDelta.usage.output_tokens);
  assert.ok(['end_turn', 'max_tokens'].includes(final.stop_reason));
  assert.match(final.id, /^msg_/);
  // streamed and non-streamed agree at temperature 0
  const a = await client.messages.create(req({ max_tokens: 10 }));
  const b = await client.messages.stream(req({ max_tokens: 10 })).finalMessage();
  assert.equal(b.content[0].text, a.content[0].text);
  assert.equal(b.usage.output_tokens, a.usage.output_tokens);
  assert.equal(b.stop_reason, a.stop_reason);
});

test('15. tool use: tool_choice tool forces a tool_use block with a toolu_ id, the name and an input object', async (t) => {
  if (skip) return t.skip(skip);
  const models = [THINK, ...(env.hermesSkip ? [] : ['org/hermes'])];
  if (env.hermesSkip) t.diagnostic(`Hermes family not tested: ${env.hermesSkip}`);
  for (const model of models) {
    for (const tool_choice of [{ type: 'tool', name: 'get_weather' }, { type: 'any' }]) {
      const m = await client.messages.create({
        model, max_tokens: 80, temperature: 0, thinking: { type: 'disabled' },
        tools: [TIME_TOOL, WEATHER_TOOL], tool_choice, messages: [{ role: 'user', content: 'Weather in Oslo?' }],
      });
      assert.equal(m.stop_reason, 'tool_use', `${model} ${JSON.stringify(tool_choice)}: ${JSON.stringify(m.content)}`);
      const calls = m.content.filter((b) => b.type === 'tool_use');
      assert.equal(calls.length, 1);
      assert.match(calls[0].id, /^toolu_[0-9a-f]{24}$/);
      if (tool_choice.type === 'tool') assert.equal(calls[0].name, 'get_weather');
      else assert.ok(['get_weather', 'get_time'].includes(calls[0].name));
      assert.equal(typeof calls[0].input, 'object');
      if (calls[0].name === 'get_weather') {
        assert.equal(typeof calls[0].input.city, 'string');
        assert.ok(calls[0].input.city.length <= 8);
      }
    }
  }
  // the same through a plain JSON schema (output_config.format) with tool_choice auto
  const m = await client.messages.create({
    model: THINK, max_tokens: 80, temperature: 0, thinking: { type: 'disabled' },
    tools: [WEATHER_TOOL], output_config: FORCE_WEATHER_CALL, messages: [{ role: 'user', content: 'Weather in Oslo?' }],
  });
  assert.equal(m.stop_reason, 'tool_use');
});

test('16. streaming tool use: input {} at start, input_json_delta fragments assemble to the input', async (t) => {
  if (skip) return t.skip(skip);
  const s = client.messages.stream({
    model: THINK, max_tokens: 80, temperature: 0, thinking: { type: 'disabled' },
    tools: [WEATHER_TOOL], tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'Weather in Oslo?' }],
  });
  const events = [];
  s.on('streamEvent', (e) => events.push(e));
  const final = await s.finalMessage();
  const start = events.find((e) => e.type === 'content_block_start' && e.content_block.type === 'tool_use');
  assert.ok(start, 'a tool_use block started');
  assert.deepEqual(start.content_block.input, {});
  const json = events.filter((e) => e.type === 'content_block_delta' && e.index === start.index)
    .map((e) => { assert.equal(e.delta.type, 'input_json_delta'); return e.delta.partial_json; }).join('');
  const block = final.content[start.index];
  assert.equal(block.type, 'tool_use');
  assert.deepEqual(JSON.parse(json), block.input);
  assert.equal(final.stop_reason, 'tool_use');
  const md = events.find((e) => e.type === 'message_delta');
  assert.equal(md.delta.stop_reason, 'tool_use');
  // indexes are contiguous from 0 and each block stops once
  const starts = events.filter((e) => e.type === 'content_block_start').map((e) => e.index);
  assert.deepEqual(starts, starts.map((_, i) => i));
  assert.deepEqual(events.filter((e) => e.type === 'content_block_stop').map((e) => e.index), starts);
});

const toolTurns = (resultContent, isError = false) => [
  { role: 'user', content: 'Weather in Oslo?' },
  { role: 'assistant', content: [
    { type: 'text', text: 'Let me check.' },
    { type: 'tool_use', id: 'toolu_01abc', name: 'get_weather', input: { city: 'Oslo' } },
  ] },
  { role: 'user', content: [
    { type: 'tool_result', tool_use_id: 'toolu_01abc', content: resultContent, ...(isError ? { is_error: true } : {}) },
    { type: 'text', text: 'And tomorrow?' },
  ] },
];

test('17. tool round trip: tool_use and tool_result turns (string, blocks, is_error) are rendered', async (t) => {
  if (skip) return t.skip(skip);
  for (const model of [TINY, THINK]) {
    for (const [content, isError] of [['12 degrees, sunny', false], [[{ type: 'text', text: '12 degrees' }, { type: 'text', text: 'sunny' }], false], ['city not found', true]]) {
      const m = await client.messages.create({ model, max_tokens: 4, tools: [WEATHER_TOOL], messages: toolTurns(content, isError) });
      assert.equal(m.type, 'message');
      assert.ok(m.content.length >= 1);
    }
  }
  const plain = await client.messages.countTokens({ model: TINY, messages: [{ role: 'user', content: 'Weather in Oslo?' }] });
  const withTools = await client.messages.countTokens({ model: TINY, tools: [WEATHER_TOOL], messages: [{ role: 'user', content: 'Weather in Oslo?' }] });
  assert.ok(withTools.input_tokens > plain.input_tokens + 10, 'the tool definitions are rendered');
  const short = await client.messages.countTokens({ model: TINY, tools: [WEATHER_TOOL], messages: toolTurns('x') });
  const long = await client.messages.countTokens({ model: TINY, tools: [WEATHER_TOOL], messages: toolTurns('a much longer tool result with many more words in it') });
  assert.ok(long.input_tokens > short.input_tokens, 'the tool result is rendered');
  assert.ok(short.input_tokens > withTools.input_tokens, 'the tool_use and tool_result turns are rendered');
});

test('18. tool_result with an unknown tool_use_id is a 400 naming the block', async (t) => {
  if (skip) return t.skip(skip);
  const msgs = toolTurns('x');
  msgs[2].content[0].tool_use_id = 'toolu_nope';
  await assert.rejects(client.messages.create({ model: TINY, max_tokens: 4, messages: msgs }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.type, 'invalid_request_error');
    assert.match(e.error.error.message, /messages\[2\]\.content\[0\]\.tool_use_id/);
    return true;
  });
  // a tool_result with no tool_use before it at all
  const r = await post(env.srv.url, '/v1/messages', { model: TINY, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'x' }] }] });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.type, 'invalid_request_error');
});

test('19. tool_choice none, any (disable_parallel_tool_use), auto and tool are accepted; a bad one is 400', async (t) => {
  if (skip) return t.skip(skip);
  for (const tc of [{ type: 'none' }, { type: 'any', disable_parallel_tool_use: true }, { type: 'auto' }, { type: 'tool', name: 'get_weather' }]) {
    const m = await client.messages.create(req({ tools: [WEATHER_TOOL], tool_choice: tc }));
    assert.equal(m.type, 'message', JSON.stringify(tc));
  }
  // any with disable_parallel_tool_use: exactly one call
  const one = await client.messages.create({
    model: THINK, max_tokens: 80, temperature: 0, thinking: { type: 'disabled' }, tools: [WEATHER_TOOL, TIME_TOOL],
    tool_choice: { type: 'any', disable_parallel_tool_use: true }, messages: [{ role: 'user', content: 'Weather?' }],
  });
  assert.equal(one.content.filter((b) => b.type === 'tool_use').length, 1);
  assert.equal(one.stop_reason, 'tool_use');
  // none: calls are not parsed out of the text, even when the output is one
  const m = await client.messages.create({
    model: THINK, max_tokens: 80, temperature: 0, thinking: { type: 'disabled' }, tools: [WEATHER_TOOL],
    tool_choice: { type: 'none' }, output_config: FORCE_WEATHER_CALL, messages: [{ role: 'user', content: 'Weather?' }],
  });
  assert.ok(m.content.every((b) => b.type === 'text'));
  assert.notEqual(m.stop_reason, 'tool_use');
  for (const [tc, re] of [[{ type: 'tool', name: 'nope' }, /tool_choice\.name/], [{ type: 'sometimes' }, /tool_choice\.type/]]) {
    await assert.rejects(client.messages.create(req({ tools: [WEATHER_TOOL], tool_choice: tc })),
      (e) => e.status === 400 && e.type === 'invalid_request_error' && re.test(e.error.error.message));
  }
});

test('20. image blocks: 400 naming the block (no vision); a bad media_type is named', async (t) => {
  if (skip) return t.skip(skip);
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
  const img = (media_type) => ({ type: 'image', source: { type: 'base64', media_type, data: png } });
  await assert.rejects(client.messages.create(req({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, img('image/png')] }] })),
    (e) => e.status === 400 && e.type === 'invalid_request_error' && /messages\[0\]\.content\[1\].*image/.test(e.error.error.message));
  await assert.rejects(client.messages.create(req({ messages: [{ role: 'user', content: [img('image/tiff')] }] })),
    (e) => e.status === 400 && /media_type/.test(e.error.error.message));
  // an image inside a tool_result is refused too
  const msgs = toolTurns([{ type: 'text', text: 'map:' }, img('image/png')]);
  await assert.rejects(client.messages.create({ model: TINY, max_tokens: 4, messages: msgs }),
    (e) => e.status === 400 && /messages\[2\]\.content\[0\]\.content\[1\]/.test(e.error.error.message));
});

test('21. thinking enabled: a thinking block with a signature, then text; streamed signature_delta before the stop', async (t) => {
  if (skip) return t.skip(skip);
  const m = await client.messages.create({ model: THINK, max_tokens: 12, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(m.content[0].type, 'thinking');
  assert.ok(m.content[0].thinking.length > 0);
  assert.match(m.content[0].signature, /^parley:[0-9a-f]{16}$/);
  assert.ok(m.content.slice(1).some((b) => b.type === 'text'), 'a text block follows');
  const s = client.messages.stream({ model: THINK, max_tokens: 12, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Hi' }] });
  const events = [];
  s.on('streamEvent', (e) => events.push(e));
  const final = await s.finalMessage();
  const at = events.findIndex((e) => e.type === 'content_block_start');
  assert.equal(events[at].content_block.type, 'thinking');
  const stop = events.findIndex((e) => e.type === 'content_block_stop' && e.index === events[at].index);
  const deltas = events.slice(at + 1, stop).filter((e) => e.type === 'content_block_delta').map((e) => e.delta.type);
  assert.ok(deltas.length >= 2);
  assert.deepEqual(deltas.slice(0, -1), deltas.slice(0, -1).map(() => 'thinking_delta'));
  assert.equal(deltas.at(-1), 'signature_delta');
  assert.equal(final.content[0].type, 'thinking');
  assert.match(final.content[0].signature, /^parley:/);
  assert.ok(final.content.some((b) => b.type === 'text'));
  // disabled: no thinking block, and the template renders without <think>
  const off = await client.messages.create({ model: THINK, max_tokens: 6, thinking: { type: 'disabled' }, messages: [{ role: 'user', content: 'Hi' }] });
  assert.ok(off.content.every((b) => b.type !== 'thinking'));
  const cOn = await client.messages.countTokens({ model: THINK, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Hi' }] });
  const cOff = await client.messages.countTokens({ model: THINK, thinking: { type: 'disabled' }, messages: [{ role: 'user', content: 'Hi' }] });
  assert.ok(cOn.input_tokens > cOff.input_tokens);
});

test('22. the previous turn\'s thinking (and redacted_thinking) passed back unchanged is accepted and rendered', async (t) => {
  if (skip) return t.skip(skip);
  const first = await client.messages.create({ model: THINK, max_tokens: 8, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Hi' }] });
  const turns = (content) => [{ role: 'user', content: 'Hi' }, { role: 'assistant', content }, { role: 'user', content: 'More?' }];
  const m = await client.messages.create({ model: THINK, max_tokens: 4, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: turns([...first.content, { type: 'redacted_thinking', data: 'opaque' }]) });
  assert.equal(m.type, 'message');
  const withThinking = await client.messages.countTokens({ model: THINK, messages: turns([{ type: 'thinking', thinking: 'Let me think about this carefully.', signature: 'x' }, { type: 'text', text: 'Hello' }]) });
  const without = await client.messages.countTokens({ model: THINK, messages: turns([{ type: 'text', text: 'Hello' }]) });
  assert.ok(withThinking.input_tokens > without.input_tokens, 'thinking becomes the turn\'s reasoning_content');
});

test('23. temperature 0 is deterministic; top_k and top_p are accepted; out-of-range values are 400', async (t) => {
  if (skip) return t.skip(skip);
  const a = await client.messages.create(req({ max_tokens: 10 }));
  const b = await client.messages.create(req({ max_tokens: 10 }));
  assert.equal(a.content[0].text, b.content[0].text);
  const c = await client.messages.create(req({ temperature: 0.7, top_k: 5, top_p: 0.9 }));
  assert.equal(c.type, 'message');
  for (const [extra, re] of [[{ temperature: 1.5 }, /temperature/], [{ top_p: 2 }, /top_p/], [{ top_k: -1 }, /top_k/], [{ top_k: 'x' }, /top_k/]]) {
    await assert.rejects(client.messages.create(req(extra)), (e) => e.status === 400 && re.test(e.error.error.message), JSON.stringify(extra));
  }
});

test('24. assistant prefill: the prompt ends with the prefix; an empty final assistant turn is no prefill', async (t) => {
  if (skip) return t.skip(skip);
  const user = { role: 'user', content: 'Write JSON' };
  const m = await client.messages.create({ model: TINY, max_tokens: 4, messages: [user, { role: 'assistant', content: '{"answer": ' }] });
  assert.equal(m.type, 'message');
  assert.ok(!m.content.length || !m.content[0].text.startsWith('{"answer": '), 'the reply does not repeat the prefix');
  const open = await client.messages.countTokens({ model: TINY, messages: [user] });
  const empty = await client.messages.countTokens({ model: TINY, messages: [user, { role: 'assistant', content: '' }] });
  assert.equal(empty.input_tokens, open.input_tokens);
  const pre = await client.messages.countTokens({ model: TINY, messages: [user, { role: 'assistant', content: '{"answer": ' }] });
  const closed = await client.messages.countTokens({ model: TINY, messages: [user, { role: 'assistant', content: '{"answer": ' }, { role: 'user', content: 'x' }] });
  assert.ok(pre.input_tokens > open.input_tokens);
  assert.ok(pre.input_tokens < closed.input_tokens - 3, 'the prefill turn is not closed');
});

test('25. count_tokens equals usage.input_tokens + cache_read_input_tokens of the same request', async (t) => {
  if (skip) return t.skip(skip);
  const body = { model: TINY, system: 'Be brief.', tools: [WEATHER_TOOL], messages: [{ role: 'user', content: unique() }] };
  const count = await client.messages.countTokens(body);
  assert.ok(count.input_tokens > 0);
  const m = await client.messages.create({ ...body, max_tokens: 2 });
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, count.input_tokens);
  // only a shared template head can come from the prefix cache for a new prompt
  assert.ok(m.usage.cache_read_input_tokens < 8, JSON.stringify(m.usage));
  // the same prompt again: the prefix cache is counted as a cache read
  const again = await client.messages.create({ ...body, max_tokens: 2 });
  assert.equal(again.usage.input_tokens + again.usage.cache_read_input_tokens, count.input_tokens);
  // streaming reports the same totals in message_delta
  const s = await client.messages.stream({ ...body, max_tokens: 2 }).finalMessage();
  assert.equal(s.usage.input_tokens + s.usage.cache_read_input_tokens, count.input_tokens);
  // count_tokens has no max_tokens and checks its body like create does
  await assert.rejects(client.messages.countTokens({ model: TINY, messages: [] }), (e) => e.status === 400 && /messages/.test(e.error.error.message));
  await assert.rejects(client.messages.countTokens({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), (e) => e.status === 404 && e.type === 'not_found_error');
});

test('25b. stream: message_start reports the same cache read/creation split as message_delta', async (t) => {
  if (skip) return t.skip(skip);
  const body = { model: TINY, system: 'Be brief.', messages: [{ role: 'user', content: unique() }], max_tokens: 3 };
  const count = await client.messages.countTokens(body);
  await client.messages.create(body); // fills the prefix cache with this prompt
  const stream = await client.messages.create({ ...body, stream: true });
  let start, delta;
  for await (const ev of stream) {
    if (ev.type === 'message_start') start = ev.message.usage;
    if (ev.type === 'message_delta') delta = ev.usage;
  }
  assert.ok(delta.cache_read_input_tokens > 0, JSON.stringify(delta));
  for (const k of ['input_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'])
    assert.equal(start[k], delta[k], `${k}: message_start ${JSON.stringify(start)} vs message_delta ${JSON.stringify(delta)}`);
  assert.equal(start.input_tokens + start.cache_read_input_tokens, count.input_tokens);
});

test('U+0000 in a replayed history (text, system, thinking, tool_result) is taken, as Anthropic takes it', async (t) => {
  if (skip) return t.skip(skip);
  const nul = (s) => `${s}\u0000${s}`;
  const body = {
    model: THINK, max_tokens: 2, system: nul('sys'), tools: [WEATHER_TOOL],
    messages: [
      { role: 'user', content: nul('hi') },
      { role: 'assistant', content: [{ type: 'thinking', thinking: nul('hmm'), signature: 'x' }, { type: 'text', text: nul('ok') },
        { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: nul('5 C') }, { type: 'text', text: nul('and') }] },
    ],
  };
  const m = await client.messages.create(body);
  assert.equal(m.type, 'message');
  for await (const ev of await client.messages.create({ ...body, stream: true })) assert.ok(ev.type);
  // the NUL is part of the prompt (one more token than without it), not cut at
  const withNul = await client.messages.countTokens({ model: TINY, messages: [{ role: 'user', content: 'ab\u0000cd' }] });
  const without = await client.messages.countTokens({ model: TINY, messages: [{ role: 'user', content: 'abcd' }] });
  assert.ok(withNul.input_tokens > without.input_tokens, `${withNul.input_tokens} <= ${without.input_tokens}`);
});

test('28. beta path: ?beta=true with anthropic-beta works', async (t) => {
  if (skip) return t.skip(skip);
  const m = await client.beta.messages.create({ ...req(), betas: ['some-beta'] });
  assert.equal(m.type, 'message');
  const c = await client.beta.messages.countTokens({ model: TINY, messages: req().messages, betas: ['some-beta'] });
  assert.ok(c.input_tokens > 0);
});

test('31. metadata and unknown extra fields are accepted', async (t) => {
  if (skip) return t.skip(skip);
  const m = await client.messages.create(req({ metadata: { user_id: 'u1' }, service_tier: 'auto', some_future_field: { x: 1 } }));
  assert.equal(m.type, 'message');
  await assert.rejects(client.messages.create(req({ metadata: 'u1' })), (e) => e.status === 400 && /metadata/.test(e.error.error.message));
});

test('issue 7.4: the same conversation as OpenAI chat and Anthropic messages renders to the same prompt tokens', async (t) => {
  if (skip) return t.skip(skip);
  const { default: OpenAI } = await import('openai');
  const oa = new OpenAI({ baseURL: `${env.srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  for (const model of [TINY, THINK]) {
    const o = await oa.chat.completions.create({
      model, max_tokens: 1, tools: [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.input_schema } }],
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_01abc', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'toolu_01abc', content: '12 degrees' },
        { role: 'user', content: 'And tomorrow?' },
      ],
    });
    const a = await client.messages.countTokens({
      model, system: 'Be brief.', tools: [WEATHER_TOOL],
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_01abc', name: 'get_weather', input: { city: 'Oslo' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01abc', content: '12 degrees' }, { type: 'text', text: 'And tomorrow?' }] },
      ],
    });
    assert.equal(a.input_tokens, o.usage.prompt_tokens, model);
  }
});
