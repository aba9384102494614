// bench/hostile.mjs - the hostile-client run of issue #25 against a running
// parley (bench/hostile.sh starts the sanitizer build open and with a key
// and runs this once against each). Not part of the tests: it sends a few
// thousand requests and takes minutes under the sanitizers.
//
//   node bench/hostile.mjs URL [KEY]
//
// The surface comes from the server itself (GET /admin/routes: the server
// runs with --admin, or the key opens it), so every route of every dialect
// is attacked, the OpenAI 501 table included. Per route: the path with
// hostile parameters (encoded NUL, traversal, 8 KiB, bad UTF-8), a query
// flood of 1,200 arguments and a 16 KiB query, a foreign Origin, no key (with
// a key configured), and for body routes bodies that are not JSON, JSON
// with the wrong types, 10,000 levels deep, a raw NUL, a body stopped half
// way; WebSocket routes get a foreign Origin, a bad handshake, garbage
// frames and an idle socket. Then the transport edges on a few routes
// (unknown and doubled Transfer-Encoding, bad chunk sizes, a Content-Length
// past 2^64, a slow body, NUL bytes in header names and values, a request
// line of 60 KiB), the TTS texts that crash libespeak-ng through all three
// speech surfaces, and after every block GET /health.
//
// A clean answer: an HTTP status line with a status below 500, or a 5xx
// whose body is JSON (a 501 of the unimplemented table, the 5xx in the
// dialect's shape when a speech worker dies), or a connection the server
// closes on bytes that are not HTTP; never a hang past the limit, an HTML
// error page (but libmicrohttpd's own 4xx pages on malformed framing, which
// parley never sees, listed as mhd_html) or a dead server. Every 5xx other
// than 501 is listed in server_errors. Prints one JSON line (counts per class,
// status histogram, the failures) and exits 1 on any failure.
import net from 'node:net';
import { createRequire } from 'node:module';

const req = createRequire(new URL('../tests/api/package.json', import.meta.url));
const WebSocket = req('ws');

const [url, key] = process.argv.slice(2);
if (!url) { console.error('usage: node bench/hostile.mjs URL [KEY]'); process.exit(2); }
const { port, hostname } = new URL(url);
const AUTH = key ? `Authorization: Bearer ${key}\r\n` : '';
const EVIL_ORIGIN = 'https://evil.example';

const stats = { requests: 0, clean: 0, closed: 0, statuses: {}, failures: [], server_errors: [], mhd_html: [] };
const failure = (what, why) => { if (stats.failures.length < 60) stats.failures.push(`${what}: ${why}`); };

// Sends raw bytes (strings are latin1) with an optional pause between
// chunks; resolves {text, closed} when the server closes or ms pass.
function raw(chunks, { ms = 8000, gapMs = 0 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(Number(port), hostname);
    const got = [];
    let done = false, closed = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ text: Buffer.concat(got).toString('latin1'), closed });
    };
    const timer = setTimeout(finish, ms);
    sock.on('data', (d) => { got.push(d); });
    sock.on('end', () => { closed = true; setTimeout(finish, 20); });
    sock.on('close', () => { closed = true; finish(); });
    sock.on('error', () => { closed = true; finish(); });
    sock.on('connect', async () => {
      for (const c of chunks) {
        if (sock.destroyed) break;
        sock.write(typeof c === 'string' ? Buffer.from(c, 'latin1') : c);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

// Judges one raw exchange. allowClose: bytes that are not HTTP, where a
// closed connection without an answer is a clean refusal.
// allowSilence: a body that never ends, where waiting (until the
// connection timeout) is right too.
function judge(what, res, { allowClose = false, allowSilence = false, allowed = null, mhdHtmlOk = false } = {}) {
  stats.requests++;
  const m = res.text.match(/^HTTP\/1\.[01] (\d{3})/);
  if (!m) {
    if (allowClose && res.closed) { stats.closed++; return; }
    if (allowSilence && !res.text) { stats.clean++; return; }
    failure(what, res.closed ? 'closed without an answer' : 'no answer before the time limit');
    return;
  }
  const st = Number(m[1]);
  stats.statuses[st] = (stats.statuses[st] || 0) + 1;
  if (allowed && !allowed.includes(st)) { failure(what, `status ${st}, expected ${allowed.join('/')}`); return; }
  const head = res.text.slice(0, res.text.indexOf('\r\n\r\n') + 1 || 4096);
  const html = /content-type:\s*text\/html/i.test(head) || /<html/i.test(res.text.slice(0, 2048));
  if (html) {
    // libmicrohttpd answers a few malformed heads and chunk framings
    // itself, with its fixed HTML pages, before parley sees the request
    // (docs/http.md): a clean 4xx still, counted apart.
    if (mhdHtmlOk && st >= 400 && st < 500) { stats.mhd_html.push(`${what}: ${st}`); stats.clean++; return; }
    failure(what, `status ${st} with an HTML page`);
    return;
  }
  if (st >= 500) {
    const ct = /content-type:\s*application\/json/i.test(head);
    if (!ct) { failure(what, `status ${st} without a JSON body: ${res.text.slice(0, 160)}`); return; }
    const body = res.text.slice(res.text.indexOf('\r\n\r\n') + 4);
    if (st !== 501 && stats.server_errors.length < 40) stats.server_errors.push(`${what}: ${st} ${body.slice(0, 200)}`);
  }
  stats.clean++;
}

async function alive(after) {
  const r = await raw([`GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`], { ms: 15000 });
  if (!/^HTTP\/1\.1 200/.test(r.text)) {
    failure(`health after ${after}`, r.text ? r.text.slice(0, 120) : 'no answer: the server is down');
    return false;
  }
  return true;
}

const rq = (method, path, { headers = '', body = null, auth = true, cl = true } = {}) => {
  let h = `${method} ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${auth ? AUTH : ''}${headers}`;
  if (body !== null && cl) h += `Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n`;
  return h + '\r\n' + (body ?? '');
};

const PARAMS = ['a%00b', '..%2F..%2F..%2Fetc%2Fpasswd', 'x'.repeat(8192), '%ff%fe', '%zz', 'org%2Ftiny'];
const fill = (pattern, v) => pattern.replace(/\{[^}]+\.\.\.\}/g, `${v}/${v}`).replace(/\{[^}]+\}/g, v);

const BODIES = [
  ['not JSON', 'this is not json', 'application/json'],
  ['truncated JSON', '{"model":"org/tiny","messages":[{"role":"user","content":"hi"', 'application/json'],
  ['wrong types', '{"model":1,"messages":"x","stream":"yes","input":{},"prompt":[1,2],"file":3,"text":false,"max_tokens":-1,"options":{"num_ctx":-1}}', 'application/json'],
  ['10,000 levels deep', '['.repeat(10000) + ']'.repeat(10000), 'application/json'],
  ['a raw NUL', '{"model":"org/t\x00iny","name":"a\x00b","messages":[{"role":"user","content":"h\x00i"}]}', 'application/json'],
  ['an encoded NUL', '{"model":"org/tiny\\u0000x","name":"a\\u0000b","input":"\\u0000"}', 'application/json'],
  ['bad UTF-8', '{"model":"\xff\xfe","input":"\xc0\x80"}', 'application/json'],
  ['a broken multipart', '--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF', 'multipart/form-data; boundary=b'],
  ['empty', '', 'application/json'],
];

// Bodies announced as 4 KiB that stop after 40 bytes, one per body route,
// sent 32 at a time after the routes: the server must answer or wait (up
// to its connection timeout), never hang a pool thread or crash.
const halfBodies = [];
async function sendHalfBodies() {
  for (let i = 0; i < halfBodies.length; i += 32) {
    const batch = halfBodies.slice(i, i + 32);
    const res = await Promise.all(batch.map(([, head]) => raw([head, '{"model":"org/tiny","messages":[{"role":'], { ms: 3000 })));
    res.forEach((r, k) => judge(`${batch[k][0]} body stopped half way`, r, { allowClose: true, allowSilence: true }));
  }
}

async function attackRoute(rt) {
  const isWs = rt.flags.includes('websocket');
  const base = fill(rt.pattern, 'org%2Ftiny');
  const tag = `${rt.method} ${rt.pattern}`;
  for (const v of PARAMS) {
    if (!/\{/.test(rt.pattern) && v !== PARAMS[0]) break;
    const p = fill(rt.pattern, v);
    judge(`${tag} path ${v.slice(0, 24)}`, await raw([rq(rt.method, p, { body: rt.method === 'GET' ? null : '{}' , headers: 'Content-Type: application/json\r\n' })]));
  }
  const flood = Array.from({ length: 1200 }, (_, i) => `a${i}=${i}`).join('&');
  judge(`${tag} query flood`, await raw([rq(rt.method, `${base}?${flood}`)]), { allowed: [400, 413, 414, 431] });
  judge(`${tag} 16 KiB query value`, await raw([rq(rt.method, `${base}?model=${'q'.repeat(16384)}`)]));
  judge(`${tag} NUL in the query`, await raw([rq(rt.method, `${base}?model=a%00b&name=x%00`)]));
  const origin = await raw([rq(rt.method, base, { headers: `Origin: ${EVIL_ORIGIN}\r\n`, body: rt.method === 'GET' ? null : '{}' })]);
  judge(`${tag} foreign Origin`, origin, key ? {} : { allowed: [403] });
  if (key && !rt.flags.includes('public')) judge(`${tag} no key`, await raw([rq(rt.method, base, { auth: false })]), { allowed: [401] });
  if (rt.method !== 'GET' && rt.method !== 'DELETE') {
    for (const [name, body, ct] of BODIES) {
      judge(`${tag} body ${name}`, await raw([rq(rt.method, base, { headers: `Content-Type: ${ct}\r\n`, body })]));
    }
    // Announces 4 KiB, sends 40 bytes and stops: the server must give up
    // on its own (connection timeout) or answer, never hang or crash.
    halfBodies.push([tag, rq(rt.method, base, { headers: 'Content-Type: application/json\r\nContent-Length: 4096\r\n', cl: false })]);
  }
  if (isWs) await attackWs(rt, base);
}

// WebSocket routes: a foreign Origin (refused without a key), a handshake
// without a key header, garbage after a good handshake, an idle socket.
async function attackWs(rt, path) {
  const tag = `WS ${rt.pattern}`;
  const up = (extra) => `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${AUTH}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`;
  judge(`${tag} foreign Origin`, await raw([up(`Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: ${EVIL_ORIGIN}\r\n`)], { ms: 3000 }), key ? {} : { allowed: [403] });
  judge(`${tag} no Sec-WebSocket-Key`, await raw([up('')], { ms: 3000 }), { allowed: [400, 426, 404, 401] });
  const garbage = Buffer.concat([Buffer.from(up('Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n'), 'latin1'),
    Buffer.from([0x81, 0xfe, 0xff, 0xff]), Buffer.alloc(64, 0xcc), Buffer.from([0x8f, 0x80, 0, 0, 0, 0])]);
  judge(`${tag} garbage frames`, await raw([garbage], { ms: 4000, gapMs: 50 }), { allowClose: true });
  // An idle socket: opened, never written to; closed by us after 2 s.
  // The server must neither crash nor keep the connection from others.
  await new Promise((resolve) => {
    const ws = new WebSocket(`ws://${hostname}:${port}${path}`, { headers: key ? { Authorization: `Bearer ${key}` } : {} });
    const t = setTimeout(() => { ws.terminate(); resolve(); }, 2000);
    ws.on('error', () => { clearTimeout(t); resolve(); });
    ws.on('close', () => { clearTimeout(t); resolve(); });
    ws.on('unexpected-response', () => { clearTimeout(t); ws.terminate(); resolve(); });
  });
  stats.requests++; stats.clean++;
}

async function transport() {
  const P = '/v1/chat/completions';
  const J = '{"model":"org/tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2}';
  const head = (extra) => `POST ${P} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${AUTH}Content-Type: application/json\r\n${extra}\r\n`;
  const cases = [
    ['unknown Transfer-Encoding', [head('Transfer-Encoding: gzip\r\n') + J], [400, 501]],
    ['Transfer-Encoding chunked twice', [head('Transfer-Encoding: chunked, chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n'], [400, 501]],
    ['chunked and Content-Length', [head(`Transfer-Encoding: chunked\r\nContent-Length: ${J.length}\r\n`) + J], null],
    ['a chunk size that is not hex', [head('Transfer-Encoding: chunked\r\n') + 'zz\r\nhello\r\n0\r\n\r\n'], null],
    ['a chunk size past 2^64', [head('Transfer-Encoding: chunked\r\n') + 'ffffffffffffffffff\r\nhello\r\n0\r\n\r\n'], null],
    ['Content-Length 2^64-6', [head('Content-Length: 18446744073709551610\r\n')], [413, 400]],
    ['Content-Length past 2^64', [head('Content-Length: 99999999999999999999999\r\n')], [413, 400]],
    ['two Content-Lengths', [head('Content-Length: 5\r\nContent-Length: 7\r\n') + 'hello'], [400]],
    ['NUL in a header value', [head('X-Thing: a\x00b\r\n') + ''], null],
    ['NUL in a header name', [head('X-Th\x00ing: a\r\n') + ''], null],
    ['NUL in the request line', [`GET /v1/mo\x00dels HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${AUTH}\r\n`], null],
    ['a 60 KiB request line', [`GET /v1/models?${'a'.repeat(61440)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${AUTH}\r\n`], null],
    ['not HTTP at all', ['\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n'], null],
    ['HTTP/0.9', ['GET /health\r\n'], null],
    ['a foreign Host', [`GET /v1/models HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n${AUTH}\r\n`], null],
    ['an obsolete folded header', [head('X-A: 1\r\n  folded\r\n')], null],
  ];
  for (const [name, chunks, allowed] of cases) judge(`transport: ${name}`, await raw(chunks), { allowClose: true, allowed, mhdHtmlOk: true });
  // A body sent a byte every 200 ms for 4 s: answered or cut, never a crash.
  const slow = [head(`Content-Length: ${J.length}\r\n`), ...J.slice(0, 20).split('')];
  judge('transport: a slow body', await raw(slow, { ms: 12000, gapMs: 200 }), { allowClose: true });
  // 20 slow bodies at once, each announcing 8 MiB: the body budget holds.
  const many = await Promise.all(Array.from({ length: 20 }, () =>
    raw([head('Content-Length: 8388608\r\n'), Buffer.alloc(65536, 0x20), Buffer.alloc(65536, 0x20)], { ms: 6000, gapMs: 500 })));
  for (const r of many) { stats.requests++; if (r.text && !/^HTTP\/1\.1 [1-4]\d\d|^HTTP\/1\.1 503/.test(r.text)) failure('transport: 20 slow 8 MiB bodies', r.text.slice(0, 100)); else stats.clean++; }
}

// The inputs that crash Debian's libespeak-ng, through every speech surface.
async function speech() {
  const CRASHERS = ['☃☃', '©©', '😀😀'];
  for (const text of CRASHERS) {
    const body = JSON.stringify({ model: 'tts-1', voice: 'espeak:hi', input: text, response_format: 'wav' });
    judge(`speech /v1/audio/speech ${text}`, await raw([rq('POST', '/v1/audio/speech', { headers: 'Content-Type: application/json\r\n', body: Buffer.from(body).toString('latin1') })], { ms: 30000 }));
    const dg = JSON.stringify({ text });
    judge(`speech /deepgram/v1/speak ${text}`, await raw([rq('POST', '/deepgram/v1/speak?model=espeak:hi&encoding=linear16', { headers: 'Content-Type: application/json\r\n', body: Buffer.from(dg).toString('latin1') })], { ms: 30000 }));
    await new Promise((resolve) => {
      const ws = new WebSocket(`ws://${hostname}:${port}/deepgram/v1/speak?model=espeak:hi&encoding=linear16`,
        { headers: key ? { Authorization: `Token ${key}` } : {} });
      const t = setTimeout(() => { ws.terminate(); resolve(); }, 20000);
      ws.on('open', () => { ws.send(JSON.stringify({ type: 'Speak', text })); ws.send(JSON.stringify({ type: 'Flush' })); });
      ws.on('message', (d, bin) => { if (!bin && /Flushed|Warning|Error/.test(d.toString())) { ws.close(); } });
      ws.on('close', () => { clearTimeout(t); resolve(); });
      ws.on('error', () => { clearTimeout(t); resolve(); });
      ws.on('unexpected-response', (_r, res) => { failure(`speak WS ${text}`, `upgrade HTTP ${res.statusCode}`); clearTimeout(t); resolve(); });
    });
    stats.requests++; stats.clean++;
    await alive(`the crashing text ${text}`);
  }
}

const t0 = Date.now();
const list = await fetch(`${url}/admin/routes`, { headers: key ? { Authorization: `Bearer ${key}` } : {} });
if (list.status !== 200) { console.error(`GET /admin/routes: ${list.status} (start the server with --admin)`); process.exit(2); }
const { routes } = await list.json();
for (const rt of routes) {
  await attackRoute(rt);
  if (!(await alive(`${rt.method} ${rt.pattern}`))) break;
}
await sendHalfBodies();
await alive('the half-sent bodies');
await transport();
await alive('the transport edges');
await speech();
const up = await alive('everything');
console.log(JSON.stringify({ url, key: Boolean(key), routes: routes.length, seconds: Math.round((Date.now() - t0) / 1000), ...stats, alive: up }));
process.exit(stats.failures.length || !up ? 1 : 0);
