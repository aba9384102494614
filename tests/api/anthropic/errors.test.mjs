// errors.test.mjs - the Anthropic error paths: credentials (x-api-key and
// Bearer, checks 9 and 30), the error body and status table (check 33),
// bodies too large or too long for the context, and every validation error
// of /v1/messages naming its field (spec ../shared/specs/anthropic.md 1.3, 2.1).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { setup, post, WEATHER_TOOL } from './setup.mjs';

const TINY = 'org/tiny';
let env, skip;
const KEY = 'sk-local-test-key';

before(async () => {
  env = await setup({ args: ['--api-key', KEY, '--max-body', '65536'] });
  if (env.skip) skip = env.skip;
});
after(async () => { if (env?.teardown) await env.teardown(); });

const body = (extra = {}) => ({ model: TINY, max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }], ...extra });
const send = (b, headers = {}) => post(env.srv.url, '/v1/messages', b, { 'x-api-key': KEY, ...headers });

function assertError(r, status, type, re) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.body.type, 'error');
  assert.equal(r.body.error.type, type);
  assert.equal(typeof r.body.error.message, 'string');
  if (re) assert.match(r.body.error.message, re);
  assert.match(r.headers.get('request-id'), /^req_[0-9a-f]{32}$/);
  assert.equal(r.body.request_id, r.headers.get('request-id'));
}

test('9. a wrong or missing key is AuthenticationError authentication_error', async (t) => {
  if (skip) return t.skip(skip);
  const bad = new Anthropic({ baseURL: env.srv.url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.messages.create(body()), (e) => {
    assert.ok(e instanceof Anthropic.AuthenticationError);
    assert.equal(e.status, 401);
    assert.equal(e.type, 'authentication_error');
    assert.match(e.requestID, /^req_/);
    return true;
  });
  await assert.rejects(bad.models.retrieve('org/tiny'), (e) => e instanceof Anthropic.AuthenticationError && e.type === 'authentication_error');
  const r = await post(env.srv.url, '/v1/messages', body(), { 'x-api-key': '' });
  assertError(r, 401, 'authentication_error');
});

test('30. X-Api-Key and Authorization: Bearer (authToken) are both accepted', async (t) => {
  if (skip) return t.skip(skip);
  const byKey = new Anthropic({ baseURL: env.srv.url, apiKey: KEY, maxRetries: 0 });
  assert.equal((await byKey.messages.create(body())).type, 'message');
  const byToken = new Anthropic({ baseURL: env.srv.url, apiKey: null, authToken: KEY, maxRetries: 0 });
  assert.equal((await byToken.messages.create(body())).type, 'message');
  assert.ok((await byToken.messages.countTokens({ model: TINY, messages: body().messages })).input_tokens > 0);
});

test('33. /v1/messages answers in the Anthropic shape even without anthropic-version', async (t) => {
  if (skip) return t.skip(skip);
  const r = await send(body({ max_tokens: undefined }), { 'anthropic-version': '' });
  assertError(r, 400, 'invalid_request_error', /max_tokens/);
  const unknown = await post(env.srv.url, '/v1/messages/nope', body(), { 'x-api-key': KEY });
  assertError(unknown, 404, 'not_found_error');
  const r405 = await fetch(`${env.srv.url}/v1/messages`, { headers: { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' } });
  assert.equal(r405.status, 405);
  assert.equal((await r405.json()).type, 'error');
});

test('33. a body over --max-body is 413 request_too_large; a prompt over the context is 400 (streaming too)', async (t) => {
  if (skip) return t.skip(skip);
  const big = await send(body({ messages: [{ role: 'user', content: 'x'.repeat(70000) }] }));
  assertError(big, 413, 'request_too_large');
  const long = body({ messages: [{ role: 'user', content: 'hello world '.repeat(900) }] });
  // Anthropic's own words, which Claude Code matches to compact instead of
  // retrying: "prompt is too long: N tokens > M maximum" (N the request's
  // count_tokens, M the most the 1024-position context leaves the prompt)
  const client = new Anthropic({ baseURL: env.srv.url, apiKey: KEY, maxRetries: 0 });
  const n = (await client.messages.countTokens({ model: TINY, messages: long.messages })).input_tokens;
  const exact = new RegExp(`^prompt is too long: ${n} tokens > 1023 maximum$`);
  assertError(await send(long), 400, 'invalid_request_error', exact);
  assertError(await send({ ...long, stream: true }), 400, 'invalid_request_error', exact);
  await assert.rejects(client.messages.stream(long).finalMessage(), (e) => e instanceof Anthropic.BadRequestError &&
    e.error.error.type === 'invalid_request_error' && exact.test(e.error.error.message));
});

// Every validation error: [what is sent, the JSON path the message names].
const CASES = [
  ['invalid JSON', '{"model": ', /JSON/],
  ['a JSON array body', '[1]', /object/],
  ['model missing', body({ model: undefined }), /model/],
  ['max_tokens 0', body({ max_tokens: 0 }), /max_tokens/],
  ['max_tokens a string', body({ max_tokens: '5' }), /max_tokens/],
  ['messages missing', body({ messages: undefined }), /messages/],
  ['messages empty', body({ messages: [] }), /messages/],
  ['messages an object', body({ messages: { role: 'user' } }), /messages/],
  ['a message not an object', body({ messages: ['Hi'] }), /messages\[0\]/],
  ['role missing', body({ messages: [{ content: 'Hi' }] }), /messages\[0\]\.role/],
  ['role tool', body({ messages: [{ role: 'tool', content: 'Hi' }] }), /messages\[0\]\.role/],
  ['content missing', body({ messages: [{ role: 'user' }] }), /messages\[0\]\.content/],
  ['content a number', body({ messages: [{ role: 'user', content: 5 }] }), /messages\[0\]\.content/],
  ['content an empty array', body({ messages: [{ role: 'user', content: [] }] }), /messages\[0\]\.content/],
  ['a block without type', body({ messages: [{ role: 'user', content: [{ text: 'Hi' }] }] }), /messages\[0\]\.content\[0\]\.type/],
  ['a text block without text', body({ messages: [{ role: 'user', content: [{ type: 'text' }] }] }), /messages\[0\]\.content\[0\]\.text/],
  ['an unknown block type', body({ messages: [{ role: 'user', content: [{ type: 'video', data: 'x' }] }] }), /messages\[0\]\.content\[0\]\.type/],
  ['a document block', body({ messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'x' } }] }] }), /messages\[0\]\.content\[0\]/],
  ['tool_use in a user turn', body({ messages: [{ role: 'user', content: [{ type: 'tool_use', id: 'toolu_1', name: 'f', input: {} }] }] }), /messages\[0\]\.content\[0\]\.type/],
  ['tool_use input not an object', body({ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'f', input: '{}' }] }] }), /messages\[1\]\.content\[0\]\.input/],
  ['tool_use without id', body({ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: [{ type: 'tool_use', name: 'f', input: {} }] }] }), /messages\[1\]\.content\[0\]\.id/],
  ['thinking block without thinking', body({ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: [{ type: 'thinking', signature: 's' }] }] }), /messages\[1\]\.content\[0\]\.thinking/],
  ['tool_result content a number', body({ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'f', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 5 }] }] }), /messages\[2\]\.content\[0\]\.content/],
  ['system a number', body({ system: 5 }), /system/],
  ['system blocks with an image', body({ system: [{ type: 'image', source: { type: 'url', url: 'http://x' } }] }), /system\[0\]/],
  ['temperature above 1', body({ temperature: 1.01 }), /temperature/],
  ['top_p a string', body({ top_p: 'high' }), /top_p/],
  ['top_k fractional', body({ top_k: 1.5 }), /top_k/],
  ['stop_sequences a string', body({ stop_sequences: 'STOP' }), /stop_sequences/],
  ['stop_sequences with a number', body({ stop_sequences: ['a', 1] }), /stop_sequences\[1\]/],
  ['stream a string', body({ stream: 'yes' }), /stream/],
  ['tools an object', body({ tools: WEATHER_TOOL }), /tools/],
  ['a tool without name', body({ tools: [{ input_schema: { type: 'object' } }] }), /tools\[0\]\.name/],
  ['a tool without input_schema', body({ tools: [{ name: 'f' }] }), /tools\[0\]\.input_schema/],
  ['a server tool', body({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }), /tools\[0\]\.type/],
  ['tool_choice a string', body({ tools: [WEATHER_TOOL], tool_choice: 'auto' }), /tool_choice/],
  ['tool_choice any without tools', body({ tool_choice: { type: 'any' } }), /tool_choice/],
  ['tool_choice tool without name', body({ tools: [WEATHER_TOOL], tool_choice: { type: 'tool' } }), /tool_choice\.name/],
  ['thinking a string', body({ thinking: 'on' }), /thinking/],
  ['thinking enabled without budget', body({ thinking: { type: 'enabled' } }), /thinking\.budget_tokens/],
  ['thinking budget 0', body({ thinking: { type: 'enabled', budget_tokens: 0 } }), /thinking\.budget_tokens/],
  ['thinking of an unknown type', body({ thinking: { type: 'deep' } }), /thinking\.type/],
  ['output_config format of another type', body({ output_config: { format: { type: 'xml' } } }), /output_config\.format\.type/],
  ['output_config schema missing', body({ output_config: { format: { type: 'json_schema' } } }), /output_config\.format\.schema/],
  ['output_config effort unknown', body({ output_config: { effort: 'extreme' } }), /output_config\.effort/],
  ['an uncompilable schema', body({ output_config: { format: { type: 'json_schema', schema: { type: 'object', properties: { a: { $ref: '#/nope' } } } } } }), /output_config\.format\.schema/],
];

test('every validation error is 400 invalid_request_error naming the field', async (t) => {
  if (skip) return t.skip(skip);
  for (const [what, b, re] of CASES) {
    const r = await send(b);
    assert.equal(r.status, 400, `${what}: ${r.text}`);
    assertError(r, 400, 'invalid_request_error', re);
  }
  // count_tokens validates the same way
  for (const [what, b, re] of CASES.filter(([w]) => !/max_tokens|temperature|top_|stop_|stream|schema/.test(w))) {
    const r = await post(env.srv.url, '/v1/messages/count_tokens', b, { 'x-api-key': KEY });
    assert.equal(r.status, 400, `count_tokens, ${what}: ${r.text}`);
    assertError(r, 400, 'invalid_request_error', re);
  }
});

test('the SDK raises BadRequestError with the error type for a bad body', async (t) => {
  if (skip) return t.skip(skip);
  const client = new Anthropic({ baseURL: env.srv.url, apiKey: KEY, maxRetries: 0 });
  await assert.rejects(client.messages.create(body({ messages: [{ role: 'robot', content: 'Hi' }] })), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.type, 'invalid_request_error');
    assert.match(e.error.error.message, /messages\[0\]\.role/);
    assert.equal(e.headers.get('x-should-retry'), 'false');
    return true;
  });
});

test('cloud-only resources (batches, files, skills, admin) answer 501 in Anthropic\'s shape, not 404 or OpenAI\'s', async (t) => {
  if (skip) return t.skip(skip);
  const client = new Anthropic({ baseURL: env.srv.url, apiKey: KEY, maxRetries: 0 });
  const calls = [
    ['GET /v1/messages/batches', () => client.messages.batches.list()],
    ['POST /v1/messages/batches', () => client.messages.batches.create({ requests: [{ custom_id: 'a', params: body() }] })],
    ['GET /v1/messages/batches/msgbatch_1', () => client.messages.batches.retrieve('msgbatch_1')],
    ['GET /v1/files', () => client.files.list()],
    ['GET /v1/files/file_1', () => client.files.retrieveMetadata('file_1')],
    ['DELETE /v1/files/file_1', () => client.files.delete('file_1')],
    ['GET /v1/skills', () => client.skills.list()],
  ];
  for (const [what, call] of calls) {
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof Anthropic.APIError, `${what}: ${e}`);
      assert.equal(e.status, 501, `${what}: ${e.message}`);
      assert.equal(e.error.type, 'error', what);
      assert.equal(e.error.error.type, 'api_error', what);
      assert.ok(e.error.error.message.startsWith(what), `${what}: ${e.error.error.message}`);
      assert.match(e.error.error.message, /not_implemented_local/);
      assert.match(e.requestID, /^req_/);
      assert.equal(e.headers.get('x-should-retry'), 'false');
      return true;
    });
  }
  // the admin API, by hand: any method, any depth
  const r = await post(env.srv.url, '/v1/organizations/workspaces/w1/members', {}, { 'x-api-key': KEY });
  assertError(r, 501, 'api_error', /^POST \/v1\/organizations\/workspaces\/w1\/members /);
  // the same paths stay OpenAI's for an OpenAI client (no anthropic-version)
  const oai = await fetch(`${env.srv.url}/v1/files`, { headers: { authorization: `Bearer ${KEY}` } });
  assert.equal(oai.status, 200);
  assert.equal((await oai.json()).object, 'list');
});
