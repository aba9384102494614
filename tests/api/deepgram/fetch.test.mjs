// fetch.test.mjs - Deepgram's outbound requests (../shared/specs/deepgram.md
// 3.1 and 3.4, checks 11 and 21): a {"url"} body and a `callback`, allowed
// only to the hosts of --fetch-hosts. A small node HTTP server on loopback
// plays the remote side: it serves a WAV and records callbacks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { DeepgramClient, Deepgram } from '@deepgram/sdk';
import { startServer } from '../lib/server.mjs';

let srv, dg, remote, remoteUrl, wav, skip = null;
const callbacks = [];

before(async () => {
  srv = await startServer({ args: ['--fetch-hosts', '127.0.0.1'] });
  dg = new DeepgramClient({ apiKey: 'k', baseUrl: `${srv.url}/deepgram` });
  const probe = await fetch(`${srv.url}/deepgram/v1/models`);
  if (probe.status === 404) { skip = 'this binary has no Deepgram routes'; return; }
  const res = await fetch(`${srv.url}/deepgram/v1/speak?model=aura-orion-en&encoding=linear16&sample_rate=16000`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'Go forward ten meters.' }),
  });
  wav = Buffer.from(await res.arrayBuffer());
  remote = http.createServer((req, rsp) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/a.wav') { rsp.writeHead(200, { 'Content-Type': 'audio/wav' }); rsp.end(wav); return; }
      if (req.url === '/cb') { callbacks.push({ method: req.method, type: req.headers['content-type'], body }); rsp.end('ok'); return; }
      rsp.writeHead(404); rsp.end('no');
    });
  });
  await new Promise((r) => remote.listen(0, '127.0.0.1', r));
  remoteUrl = `http://127.0.0.1:${remote.address().port}`;
});
after(async () => {
  if (remote) remote.close();
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
});

const waitFor = async (pred, ms = 20000) => {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
};

test('transcribeUrl from an allowed host: the fetched audio is transcribed', async (t) => {
  if (skip) return t.skip(skip);
  const r = await dg.listen.v1.media.transcribeUrl({ url: `${remoteUrl}/a.wav`, model: 'nova-3' });
  assert.match(r.results.channels[0].alternatives[0].transcript, /forward/);
  assert.ok(r.metadata.duration > 1);
});

test('url errors: a host not allowed, a 404, a non-http scheme are 400 naming the cause', async (t) => {
  if (skip) return t.skip(skip);
  const port = remote.address().port;
  const cases = [
    [`http://localhost:${port}/a.wav`, /fetch-hosts localhost/],
    [`${remoteUrl}/missing.wav`, /HTTP 404/],
    ['file:///etc/passwd', /http and https/],
    ['not a url', /not a valid/],
  ];
  for (const [url, re] of cases) {
    await assert.rejects(dg.listen.v1.media.transcribeUrl({ url, model: 'nova-3' }), (e) => {
      assert.ok(e instanceof Deepgram.BadRequestError, `${url}: ${e}`);
      assert.match(e.body.err_msg, re);
      return true;
    });
  }
});

test('callback: 200 with only request_id at once, then the full response POSTed to the callback', async (t) => {
  if (skip) return t.skip(skip);
  const r = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3', callback: `${remoteUrl}/cb`, punctuate: true });
  assert.deepEqual(Object.keys(r), ['request_id']);
  assert.ok(await waitFor(() => callbacks.length >= 1), 'no callback arrived');
  const cb = callbacks.shift();
  assert.equal(cb.method, 'POST');
  assert.match(cb.type, /application\/json/);
  const body = JSON.parse(cb.body);
  assert.equal(body.metadata.request_id, r.request_id);
  assert.match(body.results.channels[0].alternatives[0].transcript, /forward/i);
});

test('callback_method PUT, and a callback to a host not allowed is 400', async (t) => {
  if (skip) return t.skip(skip);
  const res = await fetch(`${srv.url}/deepgram/v1/listen?callback=${encodeURIComponent(`${remoteUrl}/cb`)}&callback_method=put`, {
    method: 'POST', headers: { 'Content-Type': 'audio/wav' }, body: new Uint8Array(wav),
  });
  assert.equal(res.status, 200);
  const { request_id } = await res.json();
  assert.ok(await waitFor(() => callbacks.length >= 1), 'no callback arrived');
  const cb = callbacks.shift();
  assert.equal(cb.method, 'PUT');
  assert.equal(JSON.parse(cb.body).metadata.request_id, request_id);
  const bad = await fetch(`${srv.url}/deepgram/v1/listen?callback=${encodeURIComponent('http://10.0.0.1/cb')}`, {
    method: 'POST', headers: { 'Content-Type': 'audio/wav' }, body: new Uint8Array(wav),
  });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).err_msg, /--fetch-hosts 10\.0\.0\.1/);
});
