// hostile.test.mjs - a catalogue of hostile requests, each answered with a
// clean error (or a closed connection) while the server keeps serving and
// returns to zero requests in flight.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, rawRequest } from '../lib/server.mjs';

let srv;
before(async () => { srv = await startServer({ args: ['--admin', '--conn-timeout', '2', '--max-body', '64K'] }); });
after(async () => { await srv.stop(); });

async function stillHealthy() {
  const r = await fetch(`${srv.url}/health`);
  assert.equal(r.status, 200);
  await r.arrayBuffer();
}
const status = (text) => Number((text.match(/^HTTP\/1\.[01] (\d{3})/) || [])[1]);

// A complete POST with a correct Content-Length (body given as latin1 text).
const post = (path, body) => `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${Buffer.byteLength(body, 'latin1')}\r\nConnection: close\r\n\r\n${body}`;

const cases = [
  ['bad UTF-8 in the path', ['GET /v1/models/\xff\xfe HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'], [400, 404]],
  ['encoded NUL in the path', ['GET /v1/models/a%00b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'], [400, 404]],
  ['raw NUL in the path', ['GET /he\x00alth HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'], [400, 404]],
  ['bad percent escape', ['GET /v1/models/%zz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'], [400, 404]],
  ['a header flood', ['GET /health HTTP/1.1\r\nHost: localhost\r\n' + Array.from({ length: 5000 }, (_, i) => `X-H${i}: ${'v'.repeat(40)}\r\n`).join('') + '\r\n'], [400, 413, 431]],
  ['one enormous header', ['GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: ' + 'a'.repeat(200000) + '\r\n\r\n'], [400, 413, 431]],
  ['a 10 GiB Content-Length', ['POST /admin/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10737418240\r\n\r\n'], [413]],
  ['a negative Content-Length', ['POST /admin/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: -5\r\nConnection: close\r\n\r\n'], [400]],
  ['a garbage request line', ['\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage\r\n\r\n'], [400, 0]],
  ['a truncated multipart body', ['POST /admin/multipart HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 60\r\nConnection: close\r\n\r\n--b\r\nContent-Disposition: form-data; name="f"; filename="a"\r\n\r\n'], [400, 408, 0]],
  ['a deeply nested JSON body', ['POST /admin/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 20000\r\nConnection: close\r\n\r\n' + '['.repeat(10000) + ']'.repeat(10000)], [400]],
  ['a JSON string with an encoded NUL', [post('/admin/echo', '{"a":"\\u0000"}')], [200, 400]],
  ['JSON with invalid UTF-8', [post('/admin/echo', '{"a":"\xff\xfe"}')], [400]],
];

for (const [name, chunks, allowed] of cases) {
  test(`hostile: ${name}`, async () => {
    const res = await rawRequest(srv.port, chunks, { ms: 6000 });
    const st = status(res.text) || 0;
    assert.ok(allowed.includes(st), `${name}: got status ${st}: ${res.text.slice(0, 200)}`);
    await stillHealthy();
  });
}

test('hostile: slowloris trickle is cut off by the connection timeout', async () => {
  const t0 = Date.now();
  const closedAt = await new Promise((resolve) => {
    const sock = net.connect(srv.port, '127.0.0.1');
    let i = 0;
    const header = 'GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ';
    const timer = setInterval(() => {
      if (sock.destroyed) return;
      sock.write(i < header.length ? header[i] : 'a');
      i++;
    }, 500);
    sock.on('close', () => { clearInterval(timer); resolve(Date.now()); });
    sock.on('error', () => {});
    setTimeout(() => { clearInterval(timer); sock.destroy(); resolve(null); }, 20000);
  });
  assert.ok(closedAt !== null, 'server closed the trickling connection');
  assert.ok(closedAt - t0 < 20000);
  await stillHealthy();
});

test('hostile: an oversized WebSocket frame header (2^63 length) closes the socket', async () => {
  const key = 'dGhlIHNhbXBsZSBub25jZQ==';
  const upgrade = `GET /admin/ws-echo HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
  // The header claims 2^63-1 bytes; a little payload follows, as an attacker's would.
  const frame = Buffer.concat([Buffer.from([0x81, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4]), Buffer.alloc(100, 0x61)]);
  const res = await rawRequest(srv.port, [upgrade, frame], { ms: 5000, gapMs: 200 });
  assert.match(res.text, /^HTTP\/1\.1 101/);
  assert.match(res.text, /Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=/i);
  // The close frame (0x88) carries 1009 or 1002.
  const i = res.text.indexOf('\x88');
  assert.ok(i > 0, 'a close frame was sent');
  const code = (res.text.charCodeAt(i + 2) << 8) | res.text.charCodeAt(i + 3);
  assert.ok(code === 1009 || code === 1002, `close code ${code}`);
  await stillHealthy();
});

test('hostile: after the catalogue nothing is left in flight', async () => {
  let n = -1;
  for (let i = 0; i < 30 && n !== 1; i++) {
    const text = await (await fetch(`${srv.url}/metrics`)).text();
    n = Number(text.match(/parley_http_in_flight (\d+)/)[1]);
    if (n !== 1) await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(n, 1, 'only the metrics request itself is in flight');
});
