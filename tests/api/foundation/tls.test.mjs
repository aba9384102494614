// tls.test.mjs - HTTPS and WSS (issue 9 item 3): a self-signed certificate
// made with openssl, trusted by the client through NODE_EXTRA_CA_CERTS (as a
// user would) for the official SDKs, or through `ca` for raw clients. Checks:
// TLS on the main port, a plain port next to a TLS port (--tls-port), the
// openai SDK over https, its realtime client over wss with no transport
// workaround, a WebSocket echo over wss, and the start-up errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { BIN, runCli } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const apiDir = path.resolve(here, '..');
let dir, cert, key, skip, models;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-tls-'));
  cert = path.join(dir, 'cert.pem');
  key = path.join(dir, 'key.pem');
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1']);
  if (r.status !== 0) skip = `openssl could not make a certificate: ${r.stderr}`;
  models = await makeModelsDir();
  if (models.skip) skip = models.skip;
});
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (models?.cleanup) models.cleanup();
});

// Starts parley with TLS options; resolves the ports from its stdout lines.
async function serve(extra) {
  const data = mkdtempSync(path.join(dir, 'data-'));
  const proc = spawn(BIN, ['serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', data, '--models-dir', models.dir,
    '--default-model', 'org/tiny', '--tls-cert', cert, '--tls-key', key, ...extra],
  { env: { ...process.env, PARLEY_API_KEY: '', PARLEY_NO_EXTERNAL_MODELS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stderr.on('data', (d) => { err += d; });
  const ports = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start in 10 s:\n${err}`)), 10000);
    proc.stdout.on('data', (d) => {
      out += d;
      const main = out.match(/^listening on (https?):\/\/[^\s]*:(\d+)/m);
      const tls = out.match(/^tls listening on https:\/\/[^\s]*:(\d+)/m);
      if (main && (main[1] === 'https' || tls)) {
        clearTimeout(timer);
        resolve({ scheme: main[1], port: Number(main[2]), tls: main[1] === 'https' ? Number(main[2]) : Number(tls[1]) });
      }
    });
    proc.on('exit', (c) => { clearTimeout(timer); reject(new Error(`exited ${c}:\n${err}`)); });
  });
  return { ...ports, stop: () => new Promise((r) => { proc.once('exit', r); proc.kill('SIGTERM'); }) };
}

const get = (port, p) => new Promise((resolve, reject) => {
  https.get({ host: '127.0.0.1', port, path: p, ca: readFileSync(cert) }, (res) => {
    let body = '';
    res.on('data', (d) => { body += d; });
    res.on('end', () => resolve({ status: res.statusCode, body }));
  }).on('error', reject);
});

// Runs a module in a child with the certificate trusted the user's way.
function child(code) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code],
    { cwd: apiDir, env: { ...process.env, NODE_EXTRA_CA_CERTS: cert }, encoding: 'utf8', timeout: 60000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test('TLS on the main port: HTTPS answers, the openai SDK works, plain HTTP does not', async (t) => {
  if (skip) return t.skip(skip);
  const s = await serve([]);
  try {
    assert.equal(s.scheme, 'https');
    const r = await get(s.port, '/health');
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.body).status, 'ok');
    const c = child(`import OpenAI from 'openai';
      const o = new OpenAI({ baseURL: 'https://127.0.0.1:${s.port}/v1', apiKey: 'x', maxRetries: 0 });
      const r = await o.chat.completions.create({ model: 'org/tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
      console.log(JSON.stringify({ object: r.object, n: r.choices.length }));`);
    assert.equal(c.code, 0, c.err);
    assert.deepEqual(JSON.parse(c.out), { object: 'chat.completion', n: 1 });
    const plain = await fetch(`http://127.0.0.1:${s.port}/health`).then(() => 'answered', () => 'refused');
    assert.equal(plain, 'refused');
  } finally { await s.stop(); }
});

test('--tls-port: plain on the main port, TLS on the other; WSS echo and the realtime SDK over wss', async (t) => {
  if (skip) return t.skip(skip);
  const s = await serve(['--admin', '--tls-port', '-1']);
  try {
    assert.equal(s.scheme, 'http');
    assert.notEqual(s.tls, s.port);
    assert.equal((await fetch(`http://127.0.0.1:${s.port}/health`)).status, 200);
    assert.equal((await get(s.tls, '/health')).status, 200);
    const ws = new WebSocket(`wss://127.0.0.1:${s.tls}/admin/ws-echo`, { ca: readFileSync(cert) });
    await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
    ws.send('over tls');
    const echo = await new Promise((r) => ws.once('message', (m) => r(String(m))));
    ws.close();
    assert.equal(echo, 'over tls');
    const c = child(`import OpenAI from 'openai';
      import { OpenAIRealtimeWS } from 'openai/realtime/ws';
      const o = new OpenAI({ baseURL: 'https://localhost:${s.tls}/v1', apiKey: 'x', maxRetries: 0 });
      const rt = new OpenAIRealtimeWS({ model: 'org/tiny' }, o);
      const first = await new Promise((res, rej) => { rt.on('event', res); rt.on('error', rej); });
      rt.close();
      console.log(first.type);`);
    assert.equal(c.code, 0, c.err);
    assert.equal(c.out.trim(), 'session.created');
  } finally { await s.stop(); }
});

test('a certificate without its key, or an unreadable file, stops start-up with a clear message', async (t) => {
  if (skip) return t.skip(skip);
  let r = await runCli(['serve', '--port', '0', '--data-dir', path.join(dir, 'x'), '--tls-cert', cert]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--tls-cert and --tls-key go together/);
  r = await runCli(['serve', '--port', '0', '--data-dir', path.join(dir, 'y'), '--tls-cert', path.join(dir, 'nope.pem'), '--tls-key', key]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--tls-cert .*nope\.pem/);
  const bad = path.join(dir, 'bad.pem');
  writeFileSync(bad, 'not a certificate');
  r = await runCli(['serve', '--port', '0', '--data-dir', path.join(dir, 'z'), '--tls-cert', bad, '--tls-key', key]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /certificate and key do not load/);
});
