// websocket.test.mjs - the WebSocket layer through /admin/ws-echo: text and
// binary, fragmentation, ping/pong, close codes, message size limit,
// subprotocol negotiation, and the session gauge.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startServer } from '../lib/server.mjs';

let srv, url;
before(async () => {
  srv = await startServer({ args: ['--admin', '--ws-max-message', '64K'] });
  url = `ws://127.0.0.1:${srv.port}/admin/ws-echo`;
});
after(async () => { await srv.stop(); });

function open(protocols = [], options = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, options);
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}
const nextMessage = (ws) => new Promise((resolve) => ws.once('message', (data, isBinary) => resolve({ data, isBinary })));
const closed = (ws) => new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));

test('text and binary messages are echoed with their type', async () => {
  const ws = await open();
  ws.send('hello ✓');
  const t = await nextMessage(ws);
  assert.equal(t.isBinary, false);
  assert.equal(t.data.toString(), 'hello ✓');
  const bin = Buffer.from([0, 1, 2, 255, 254]);
  ws.send(bin);
  const b = await nextMessage(ws);
  assert.equal(b.isBinary, true);
  assert.deepEqual(Buffer.from(b.data), bin);
  const c = closed(ws);
  ws.close(1000, 'bye');
  assert.equal((await c).code, 1000);
});

test('a fragmented message arrives whole', async () => {
  const ws = await open();
  ws.send('part one, ', { fin: false });
  ws.send('part two, ', { fin: false });
  ws.send('part three', { fin: true });
  assert.equal((await nextMessage(ws)).data.toString(), 'part one, part two, part three');
  ws.close();
});

test('ping gets a pong with the same payload', async () => {
  const ws = await open();
  const pong = new Promise((resolve) => ws.once('pong', resolve));
  ws.ping(Buffer.from('are you there'));
  assert.equal((await pong).toString(), 'are you there');
  ws.close();
});

test('a message over the limit closes with 1009; a large one under it is echoed', async () => {
  const ws = await open();
  const ok = 'y'.repeat(60000);
  ws.send(ok);
  assert.equal((await nextMessage(ws)).data.toString().length, 60000);
  const c = closed(ws);
  ws.send('z'.repeat(70000));
  assert.equal((await c).code, 1009);
});

test('invalid UTF-8 in a text message closes with 1007', async () => {
  const ws = await open();
  const c = closed(ws);
  ws.send(Buffer.from([0x68, 0xc3, 0x28]), { binary: false });
  assert.equal((await c).code, 1007);
});

test('subprotocol: a plain one is echoed, none offered gives none', async () => {
  const a = await open(['chat.v1']);
  assert.equal(a.protocol, 'chat.v1');
  a.close();
  const b = await open();
  assert.equal(b.protocol, '');
  b.close();
});

test('upgrade without the WebSocket headers is a clean 4xx', async () => {
  const r = await fetch(`${srv.url}/admin/ws-echo`);
  assert.ok(r.status === 400 || r.status === 426, `status ${r.status}`);
});

test('the session gauge counts open sockets', async () => {
  const gauge = async () => Number((await (await fetch(`${srv.url}/metrics`)).text()).match(/parley_ws_sessions (\d+)/)[1]);
  const socks = await Promise.all([open(), open(), open()]);
  assert.equal(await gauge(), 3);
  await Promise.all(socks.map((s) => { const c = closed(s); s.close(); return c; }));
  let n = 3;
  for (let i = 0; i < 30 && n !== 0; i++) { await new Promise((r) => setTimeout(r, 100)); n = await gauge(); }
  assert.equal(n, 0);
});

test('server shutdown closes open sockets with 1001', async () => {
  const s = await startServer({ args: ['--admin'] });
  const ws = await new Promise((resolve, reject) => {
    const w = new WebSocket(`ws://127.0.0.1:${s.port}/admin/ws-echo`);
    w.once('open', () => resolve(w)); w.once('error', reject);
  });
  const c = closed(ws);
  await s.stop();
  assert.equal((await c).code, 1001);
});
