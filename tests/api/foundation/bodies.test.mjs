// bodies.test.mjs - body limits, chunked bodies, multipart parsing and
// spooling, raw uploads, and the SSE / NDJSON writers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, rawRequest, parseSSE } from '../lib/server.mjs';

let srv;
before(async () => {
  srv = await startServer({ args: ['--admin', '--max-body', '4K', '--max-upload', '64K', '--sse-keepalive', '1'] });
});
after(async () => { await srv.stop(); });

test('a JSON body within the limit is echoed; over it is 413 naming the limit', async () => {
  const small = JSON.stringify({ text: 'x'.repeat(1000) });
  const ok = await fetch(`${srv.url}/admin/echo`, { method: 'POST', body: small });
  assert.equal(ok.status, 200);
  assert.equal((await ok.json()).text.length, 1000);
  const big = JSON.stringify({ text: 'x'.repeat(5000) });
  const r = await fetch(`${srv.url}/admin/echo`, { method: 'POST', body: big });
  assert.equal(r.status, 413);
  const body = await r.json();
  assert.match(body.error.message, /4096/);
});

test('a chunked JSON body is read; a chunked body over the limit is 413', async () => {
  const res = await rawRequest(srv.port, [
    'POST /admin/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
    '5\r\n{"a":\r\n', '3\r\n 42\r\n', '1\r\n}\r\n', '0\r\n\r\n',
  ]);
  assert.match(res.text, /^HTTP\/1\.1 200/);
  assert.match(res.text, /\{"a":42\}/);
  const chunks = ['POST /admin/echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n'];
  for (let i = 0; i < 10; i++) chunks.push(`3e8\r\n${'x'.repeat(1000)}\r\n`);
  chunks.push('0\r\n\r\n');
  const over = await rawRequest(srv.port, chunks);
  assert.match(over.text, /^HTTP\/1\.1 413/);
});

test('a 10 GiB Content-Length is refused with 413 before any body is sent', async () => {
  const res = await rawRequest(srv.port, [
    'POST /admin/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n',
  ], { ms: 3000 });
  assert.match(res.text, /^HTTP\/1\.1 413/);
});

test('multipart: fields in memory, file parts spooled, sizes exact', async () => {
  const fd = new FormData();
  fd.append('purpose', 'batch');
  fd.append('expires_after[anchor]', 'created_at');
  const bytes = new Uint8Array(20000);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + 13) & 255;
  fd.append('file', new Blob([bytes], { type: 'application/octet-stream' }), 'data.bin');
  fd.append('note', 'héllo ✓');
  const r = await fetch(`${srv.url}/admin/multipart`, { method: 'POST', body: fd });
  assert.equal(r.status, 200);
  const { parts } = await r.json();
  assert.deepEqual(parts.map((p) => p.name), ['purpose', 'expires_after[anchor]', 'file', 'note']);
  assert.equal(parts[0].value, 'batch');
  assert.equal(parts[2].filename, 'data.bin');
  assert.equal(parts[2].size, 20000);
  assert.equal(parts[2].content_type, 'application/octet-stream');
  assert.equal(parts[3].value, 'héllo ✓');
});

test('multipart over the upload limit is 413; a truncated one is 400', async () => {
  const fd = new FormData();
  fd.append('file', new Blob([new Uint8Array(70000)]), 'big.bin');
  const r = await fetch(`${srv.url}/admin/multipart`, { method: 'POST', body: fd });
  assert.equal(r.status, 413);
  const b = 'XyZzy';
  const body = `--${b}\r\nContent-Disposition: form-data; name="a"\r\n\r\nvalue-without-end`;
  const t = await fetch(`${srv.url}/admin/multipart`, {
    method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${b}` }, body,
  });
  assert.equal(t.status, 400);
  assert.match((await t.json()).error.message, /multipart/i);
  const nb = await fetch(`${srv.url}/admin/multipart`, {
    method: 'POST', headers: { 'content-type': 'multipart/form-data' }, body: 'x',
  });
  assert.equal(nb.status, 400);
});

test('a raw binary body is spooled to disk', async () => {
  const r = await fetch(`${srv.url}/admin/upload`, { method: 'POST', body: new Uint8Array(50000) });
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { bytes: 50000, spooled: true });
});

test('SSE: events in order, event names, [DONE], content type, request id', async () => {
  const r = await fetch(`${srv.url}/admin/sse?n=20&event=delta&done=true`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  assert.match(r.headers.get('x-request-id'), /^req_/);
  const { events } = parseSSE(await r.text());
  assert.equal(events.length, 21);
  for (let i = 0; i < 20; i++) {
    assert.equal(events[i].event, 'delta');
    assert.deepEqual(JSON.parse(events[i].data), { index: i, text: `event ${i}` });
  }
  assert.equal(events[20].data, '[DONE]');
});

test('SSE: events are flushed as they are produced, with keep-alive comments while idle', async () => {
  const t0 = Date.now();
  const r = await fetch(`${srv.url}/admin/sse?n=2&interval_ms=1500`);
  const reader = r.body.getReader();
  const first = await reader.read();
  const firstAt = Date.now() - t0;
  let text = new TextDecoder().decode(first.value);
  for (;;) { const { done, value } = await reader.read(); if (done) break; text += new TextDecoder().decode(value); }
  const total = Date.now() - t0;
  assert.ok(firstAt < total, 'first bytes arrived before the stream ended');
  const { events, comments } = parseSSE(text);
  assert.equal(events.length, 2);
  assert.ok(comments.length >= 1, 'a keep-alive comment was sent during a 1.5 s pause with a 1 s interval');
});

test('NDJSON: one JSON object per line', async () => {
  const r = await fetch(`${srv.url}/admin/ndjson?n=7`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /application\/x-ndjson/);
  const lines = (await r.text()).split('\n');
  assert.equal(lines.pop(), '');
  assert.equal(lines.length, 7);
  lines.forEach((l, i) => assert.equal(JSON.parse(l).index, i));
});

test('a client that disconnects mid-stream is noticed: the open-stream gauge returns to zero', async () => {
  const ac = new AbortController();
  const r = await fetch(`${srv.url}/admin/sse?n=1000&interval_ms=50`, { signal: ac.signal });
  const reader = r.body.getReader();
  await reader.read();
  const metric = async () => Number((await (await fetch(`${srv.url}/metrics`)).text()).match(/parley_http_open_streams (\d+)/)[1]);
  assert.equal(await metric(), 1);
  ac.abort();
  let n = 1;
  for (let i = 0; i < 50 && n !== 0; i++) { await new Promise((res) => setTimeout(res, 100)); n = await metric(); }
  assert.equal(n, 0, 'stream closed within 5 s of the disconnect');
});
