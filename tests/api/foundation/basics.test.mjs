// basics.test.mjs - liveness, health, metrics, the CLI surface, request ids,
// CORS, and errors in every dialect through the official SDKs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { DeepgramClient } from '@deepgram/sdk';
import { startServer, runCli } from '../lib/server.mjs';

let srv;
before(async () => { srv = await startServer({ args: ['--admin'] }); });
after(async () => { await srv.stop(); });

test('GET / and HEAD / answer like Ollama', async () => {
  const r = await fetch(`${srv.url}/`);
  assert.equal(r.status, 200);
  assert.equal(await r.text(), 'Ollama is running');
  const h = await fetch(`${srv.url}/`, { method: 'HEAD' });
  assert.equal(h.status, 200);
  assert.equal(await h.text(), '');
  assert.match(h.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/);
});

test('GET /health reports status, version and uptime', async () => {
  const r = await fetch(`${srv.url}/health`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /application\/json/);
  const body = await r.json();
  assert.equal(body.status, 'ok');
  assert.match(body.version, /^\d+\.\d+\.\d+$/);
  assert.equal(typeof body.uptime_seconds, 'number');
  assert.ok(Array.isArray(body.models));
});

test('GET /metrics is Prometheus text that counts requests', async () => {
  for (let i = 0; i < 3; i++) await (await fetch(`${srv.url}/health`)).text();
  const r = await fetch(`${srv.url}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /text\/plain/);
  const text = await r.text();
  assert.match(text, /# TYPE parley_http_requests_total counter/);
  const m = text.match(/parley_http_requests_total\{[^}]*route="health"[^}]*status="200"[^}]*\} (\d+)/);
  assert.ok(m, 'health requests counted');
  assert.ok(Number(m[1]) >= 3);
  assert.match(text, /parley_http_request_duration_seconds_bucket\{/);
  assert.match(text, /parley_http_in_flight \d+/);
  assert.match(text, /parley_http_open_streams \d+/);
  assert.match(text, /parley_ws_sessions \d+/);
  // The allocator's split (bench/soak.sh fits both): live bytes are some
  // hundreds of KiB in a server with its routes and store open.
  const inUse = Number((text.match(/^parley_heap_in_use_bytes (\d+)$/m) || [])[1]);
  const free = Number((text.match(/^parley_heap_free_bytes (\d+)$/m) || [])[1]);
  assert.ok(inUse > 65536, `parley_heap_in_use_bytes ${inUse}`);
  assert.ok(Number.isInteger(free), `parley_heap_free_bytes ${free}`);
});

test('GET /admin/routes lists every route of every dialect with its flags (--admin)', async () => {
  const r = await fetch(`${srv.url}/admin/routes`);
  assert.equal(r.status, 200);
  const { routes } = await r.json();
  const find = (m, p) => routes.find((x) => x.method === m && x.pattern === p);
  for (const [m, p] of [['GET', '/health'], ['POST', '/v1/chat/completions'], ['POST', '/v1/messages'],
    ['POST', '/api/chat'], ['GET', '/api/v0/models'], ['POST', '/deepgram/v1/listen'], ['GET', '/v1/realtime'],
    ['GET', '/admin/routes']]) assert.ok(find(m, p), `${m} ${p} listed`);
  assert.deepEqual(find('GET', '/health').flags, ['public', 'reserved']);
  assert.ok(find('GET', '/v1/realtime').flags.includes('websocket'));
  assert.ok(find('POST', '/v1/chat/completions').flags.includes('json'));
  assert.ok(routes.some((x) => x.flags.includes('fallback')), 'the 501 table is there');
  assert.ok(routes.length > 300, `${routes.length} routes`);
});

test('every response carries x-request-id, unique per request', async () => {
  const ids = new Set();
  for (const p of ['/health', '/nope', '/v1/nope', '/api/nope', '/deepgram/v1/nope']) {
    const r = await fetch(srv.url + p);
    await r.arrayBuffer();
    const id = r.headers.get('x-request-id');
    assert.match(id, /^req_[0-9a-f]{32}$/, p);
    ids.add(id);
  }
  assert.equal(ids.size, 5);
});

test('OpenAI SDK: unknown route is a NotFoundError with all four error keys', async () => {
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
  // (Paths of the OpenAI spec that parley lacks answer 501: openai/surface.test.mjs.)
  await assert.rejects(client.post('/images/nonexistent', { body: { prompt: 'a cat' } }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.status, 404);
    for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in err.error, `error.${k}`);
    assert.match(err.error.message, /POST \/v1\/images\/nonexistent/);
    assert.match(err.requestID, /^req_/);
    return true;
  });
});

test('Anthropic SDK: unknown route is a NotFoundError of type not_found_error with request-id', async () => {
  const client = new Anthropic({ baseURL: srv.url, apiKey: 'anything', maxRetries: 0 });
  await assert.rejects(client.get('/v1/no-such-route'), (err) => {
    assert.ok(err instanceof Anthropic.NotFoundError);
    assert.equal(err.status, 404);
    assert.equal(err.error.type, 'error');
    assert.equal(err.error.error.type, 'not_found_error');
    assert.match(err.requestID, /^req_/);
    return true;
  });
});

test('Ollama client: unknown route / unknown model give a ResponseError with status 404', async () => {
  const r = await fetch(`${srv.url}/api/nope`);
  assert.equal(r.status, 404);
  assert.equal(await r.text(), '404 page not found');
  const ollama = new Ollama({ host: srv.url });
  await assert.rejects(ollama.show({ model: 'nope' }), (err) => { assert.equal(err.status_code, 404); return true; });
});

test('Deepgram SDK: unknown route is an error carrying err_code, err_msg and a UUID request_id', async () => {
  const dg = new DeepgramClient({ apiKey: 'anything', baseUrl: `${srv.url}/deepgram` });
  await assert.rejects(dg.manage.v1.projects.list(), (err) => {
    assert.equal(err.statusCode, 404);
    assert.equal(typeof err.body.err_code, 'string');
    assert.equal(typeof err.body.err_msg, 'string');
    assert.match(err.body.request_id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    return true;
  });
  const r = await fetch(`${srv.url}/deepgram/v1/nope`);
  const body = await r.json();
  assert.equal(r.headers.get('dg-request-id'), body.request_id);
});

test('405 names the allowed methods; HEAD is answered wherever GET is', async () => {
  const r = await fetch(`${srv.url}/health`, { method: 'DELETE' });
  assert.equal(r.status, 405);
  assert.match(r.headers.get('allow'), /GET/);
  assert.equal(r.headers.get('x-should-retry'), 'false');
  const h = await fetch(`${srv.url}/health`, { method: 'HEAD' });
  assert.equal(h.status, 200);
});

test('malformed JSON gets 400 naming line and column', async () => {
  const r = await fetch(`${srv.url}/admin/echo`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: '{\n  "a": 1,\n  "b": tru\n}',
  });
  assert.equal(r.status, 400);
  const body = await r.json();
  assert.match(body.error.message, /line 3 column \d+/);
  assert.equal(body.error.type, 'invalid_request_error');
  assert.equal(r.headers.get('x-should-retry'), 'false');
});

test('a JSON body that is not an object is refused with its type named', async () => {
  const r = await fetch(`${srv.url}/admin/echo`, { method: 'POST', body: '[1,2]' });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /JSON object, got array/);
});

test('trailing and repeated slashes, percent-encoding and unknown query params are tolerated', async () => {
  for (const p of ['/health/', '//health', '/health?beta=true', '/%68ealth']) {
    const r = await fetch(srv.url + p);
    assert.equal(r.status, 200, p);
    await r.arrayBuffer();
  }
});

test('CORS preflight is answered permissively and exposes x-request-id', async () => {
  const r = await fetch(`${srv.url}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: {
      origin: 'http://localhost:3000',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type, x-stainless-os, anthropic-version',
    },
  });
  assert.ok(r.status === 200 || r.status === 204);
  assert.ok(r.headers.get('access-control-allow-origin'));
  assert.match(r.headers.get('access-control-allow-methods'), /POST/);
  const allowed = r.headers.get('access-control-allow-headers').toLowerCase();
  for (const h of ['authorization', 'content-type', 'x-stainless-os', 'anthropic-version']) assert.ok(allowed.includes(h), h);
  const g = await fetch(`${srv.url}/health`, { headers: { origin: 'http://localhost:3000' } });
  assert.match(g.headers.get('access-control-expose-headers').toLowerCase(), /x-request-id/);
});

test('CLI: version, help, bad option values exit 2 naming the option', async () => {
  const v = await runCli(['version']);
  assert.equal(v.code, 0);
  assert.match(v.stdout, /^parley \d+\.\d+\.\d+/);
  const h = await runCli(['help']);
  assert.equal(h.code, 0);
  for (const s of ['--port', 'PARLEY_PORT', '--api-key', 'PARLEY_API_KEY', '--data-dir', 'PARLEY_DATA_DIR',
    'PARLEY_MODELS_DIR', 'PARLEY_LOG_LEVEL', 'PARLEY_HOST']) assert.ok(h.stdout.includes(s), s);
  const bad = await runCli(['serve', '--port', 'eighty']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--port: invalid value 'eighty'/);
  const badEnv = await runCli(['serve'], { PARLEY_LOG_LEVEL: 'loud' });
  assert.equal(badEnv.code, 2);
  assert.match(badEnv.stderr, /log-level: invalid value 'loud'/);
  const unknown = await runCli(['serve', '--frobnicate']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown option '--frobnicate'/);
  const cmd = await runCli(['dance']);
  assert.equal(cmd.code, 2);
});

test('refuses a non-loopback listener without a key unless --no-auth', async () => {
  const r = await runCli(['serve', '--host', '0.0.0.0', '--port', '0'], { PARLEY_API_KEY: '' });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /refusing to listen on 0\.0\.0\.0 without an API key/);
  const open = await startServer({ host: '0.0.0.0', args: ['--no-auth'] });
  try {
    const res = await fetch(`http://127.0.0.1:${open.port}/health`);
    assert.equal(res.status, 200);
  } finally { await open.stop(); }
});

test('SIGTERM shuts down gracefully with exit code 0', async () => {
  const s = await startServer();
  const code = await s.stop();
  assert.equal(code, 0);
});
