// hostcheck.test.mjs - the DNS-rebinding guard of a loopback listener
// (../shared/specs/ollama.md 0.4, conformance check 40), on every dialect's
// routes: a Host header that does not name this machine is 403; localhost,
// 127.0.0.1:PORT and [::1] pass; a CORS preflight from a localhost page
// succeeds; the official clients (which send Host: 127.0.0.1:PORT) work;
// --host-check=false turns the guard off (for a proxy forwarding a public
// Host).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { startServer } from '../lib/server.mjs';

let srv, open;
before(async () => {
  srv = await startServer({ env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  open = await startServer({ args: ['--host-check=false'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => { await srv?.stop(); await open?.stop(); });

// A raw request with our own Host header (fetch does not let one set it).
function raw(s, method, path, headers = {}) {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port: s.port, method, path, headers }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    r.on('error', reject);
    r.end();
  });
}

test('a foreign Host is 403 on every dialect', async () => {
  for (const path of ['/api/tags', '/api/version', '/', '/v1/models', '/api/v0/models', '/health']) {
    const r = await raw(srv, 'GET', path, { Host: 'evil.example.com' });
    assert.equal(r.status, 403, `${path}: ${r.body}`);
  }
  const o = await raw(srv, 'GET', '/api/tags', { Host: 'evil.example.com:11434' });
  assert.equal(o.status, 403);
  assert.match(JSON.parse(o.body).error, /evil\.example\.com/);
  const a = await raw(srv, 'GET', '/v1/models', { Host: 'attacker.test', 'anthropic-version': '2023-06-01' });
  assert.equal(a.status, 403);
  assert.equal(JSON.parse(a.body).error.type, 'permission_error');
});

test('local Host names pass', async () => {
  for (const host of ['localhost:11434', `127.0.0.1:${srv.port}`, '[::1]', '[::1]:11434', 'localhost', 'app.localhost']) {
    const r = await raw(srv, 'GET', '/api/version', { Host: host });
    assert.equal(r.status, 200, `${host}: ${r.body}`);
  }
});

test('a CORS preflight from a localhost page succeeds; from a foreign Host it does not', async () => {
  const pre = await raw(srv, 'OPTIONS', '/api/chat', {
    Host: `localhost:${srv.port}`, Origin: 'http://localhost:3000',
    'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type',
  });
  assert.ok(pre.status === 204 || pre.status === 200, `preflight: ${pre.status}`);
  assert.ok(pre.headers['access-control-allow-origin']);
  assert.match(pre.headers['access-control-allow-methods'], /POST/);
  const bad = await raw(srv, 'OPTIONS', '/api/chat', { Host: 'evil.example.com', Origin: 'http://evil.example.com' });
  assert.equal(bad.status, 403);
});

test('the official clients pass the guard', async () => {
  const o = new Ollama({ host: srv.url });
  assert.equal(typeof (await o.version()).version, 'string');
  const oa = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'k', maxRetries: 0 });
  const list = await oa.models.list();
  assert.ok(Array.isArray(list.data));
});

test('--host-check=false lets a foreign Host through', async () => {
  const r = await raw(open, 'GET', '/api/version', { Host: 'evil.example.com' });
  assert.equal(r.status, 200);
});
