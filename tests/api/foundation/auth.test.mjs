// auth.test.mjs - API keys in every accepted form, and refusals in the
// dialect of the path, through raw HTTP and the official SDKs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import WebSocket from 'ws';
import { startServer } from '../lib/server.mjs';

const KEY = 'sk-local-test-key';
const KEY2 = 'second-key';
let srv;
before(async () => { srv = await startServer({ env: { PARLEY_API_KEY: `${KEY}, ${KEY2}` } }); });
after(async () => { await srv.stop(); });

const echo = (headers) => fetch(`${srv.url}/admin/echo`, {
  method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{"x":1}',
});

test('public routes need no key: GET /health and HEAD /', async () => {
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  assert.equal((await fetch(`${srv.url}/`, { method: 'HEAD' })).status, 200);
});

test('every accepted credential form works, for each configured key', async () => {
  const forms = (k) => [
    { authorization: `Bearer ${k}` }, { authorization: `bearer ${k}` }, { authorization: `BEARER ${k}` },
    { authorization: `Token ${k}` }, { authorization: `token ${k}` },
    { 'x-api-key': k }, { 'api-key': k },
  ];
  for (const k of [KEY, KEY2]) {
    for (const h of forms(k)) {
      const r = await echo(h);
      assert.equal(r.status, 200, JSON.stringify(h));
      assert.deepEqual(await r.json(), { x: 1 });
    }
  }
});

test('missing, wrong, prefix-of and extended keys are refused with 401', async () => {
  for (const h of [{}, { authorization: 'Bearer nope' }, { authorization: `Bearer ${KEY.slice(0, -1)}` },
    { authorization: `Bearer ${KEY}x` }, { 'x-api-key': '' }, { authorization: `Basic ${KEY}` },
    { authorization: KEY }]) {
    const r = await echo(h);
    assert.equal(r.status, 401, JSON.stringify(h));
    const body = await r.json();
    assert.equal(body.error.code, 'invalid_api_key');
    assert.equal(r.headers.get('x-should-retry'), 'false');
  }
});

test('the 401 body is in the dialect of the path', async () => {
  const a = await fetch(`${srv.url}/v1/messages`, { method: 'POST', headers: { 'anthropic-version': '2023-06-01' } });
  assert.equal(a.status, 401);
  const ab = await a.json();
  assert.equal(ab.type, 'error');
  assert.equal(ab.error.type, 'authentication_error');
  const o = await fetch(`${srv.url}/api/tags`);
  assert.equal(o.status, 401);
  assert.equal(typeof (await o.json()).error, 'string');
  const d = await fetch(`${srv.url}/deepgram/v1/models`);
  assert.equal(d.status, 401);
  assert.equal((await d.json()).err_code, 'INVALID_AUTH');
});

test('OpenAI SDK with a wrong key raises AuthenticationError', async () => {
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(client.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

test('Anthropic SDK with a wrong key raises AuthenticationError', async () => {
  const client = new Anthropic({ baseURL: srv.url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(client.models.list(), (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
});

test('Ollama client with a bearer key passes auth (404 unknown model, not 401)', async () => {
  const ok = new Ollama({ host: srv.url, headers: { Authorization: `Bearer ${KEY}` } });
  await assert.rejects(ok.show({ model: 'nope' }), (e) => e.status_code === 404);
  const bad = new Ollama({ host: srv.url });
  await assert.rejects(bad.show({ model: 'nope' }), (e) => e.status_code === 401);
});

function wsOpen(url, protocols, options) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, protocols, options);
    ws.on('open', () => resolve({ ok: true, ws, protocol: ws.protocol }));
    ws.on('unexpected-response', (req, res) => resolve({ ok: false, status: res.statusCode }));
    ws.on('error', (e) => resolve({ ok: false, error: e }));
  });
}

test('WebSocket credentials: header, OpenAI subprotocol, Deepgram token pair; refusal is 401', async () => {
  const url = `ws://127.0.0.1:${srv.port}/admin/ws-echo`;
  const h = await wsOpen(url, [], { headers: { authorization: `Bearer ${KEY}` } });
  assert.ok(h.ok); h.ws.close();
  const oa = await wsOpen(url, ['realtime', `openai-insecure-api-key.${KEY}`]);
  assert.ok(oa.ok);
  assert.equal(oa.protocol, 'realtime');
  oa.ws.close();
  const dg = await wsOpen(url, ['token', KEY]);
  assert.ok(dg.ok);
  assert.equal(dg.protocol, 'token');
  dg.ws.close();
  const none = await wsOpen(url, []);
  assert.equal(none.ok, false);
  assert.equal(none.status, 401);
  const wrong = await wsOpen(url, ['token', 'wrong']);
  assert.equal(wrong.status, 401);
});
