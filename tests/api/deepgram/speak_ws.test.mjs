// speak_ws.test.mjs - Deepgram text to speech over WebSocket
// (../shared/specs/deepgram.md section 6, checks 33-34 of section 11): the
// official @deepgram/sdk socket (Metadata, Speak + Flush -> audio then
// Flushed with counting sequence ids, Close -> 1000) and a plain `ws` client
// for Clear during a long synthesis, warnings, raw formats and handshake
// errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { DeepgramClient } from '@deepgram/sdk';
import { startServer } from '../lib/server.mjs';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
let srv, dg, wsBase, skip = null;

before(async () => {
  srv = await startServer();
  dg = new DeepgramClient({ apiKey: 'k', baseUrl: `${srv.url}/deepgram` });
  wsBase = `ws://127.0.0.1:${srv.port}/deepgram/v1/speak`;
  const probe = await fetch(`${srv.url}/deepgram/v1/models`);
  if (probe.status === 404) skip = 'this binary has no Deepgram routes';
});
after(async () => {
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
});

function open(query) {
  const ws = new WebSocket(`${wsBase}?${query}`, { headers: { Authorization: 'Token k' } });
  const events = []; // {json} or {bytes}
  ws.on('message', (d, isBinary) => events.push(isBinary ? { bytes: Buffer.from(d) } : { json: JSON.parse(d.toString()) }));
  const closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  const opened = new Promise((resolve, reject) => {
    ws.on('open', resolve);
    ws.on('error', reject);
    ws.on('unexpected-response', (req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
  });
  return { ws, events, closed, opened };
}

const waitFor = async (pred, ms = 10000) => {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
};

test('SDK: Metadata first, Speak + Flush gives PCM then Flushed 0, a second flush Flushed 1, Close ends with 1000', async (t) => {
  if (skip) return t.skip(skip);
  const sock = await dg.speak.v1.createConnection({ model: 'aura-2-thalia-en', encoding: 'linear16', sample_rate: 24000 });
  const msgs = [];
  sock.on('message', (m) => msgs.push(m));
  const closed = new Promise((resolve) => sock.on('close', resolve));
  sock.connect();
  await sock.waitForOpen();
  sock.sendText({ type: 'Speak', text: 'Hi.' });
  sock.sendFlush({ type: 'Flush' });
  const isFlushed = (m) => m && typeof m === 'object' && m.type === 'Flushed';
  assert.ok(await waitFor(() => msgs.some(isFlushed)), 'no Flushed');
  sock.sendText({ type: 'Speak', text: 'Hello again.' });
  sock.sendFlush({ type: 'Flush' });
  assert.ok(await waitFor(() => msgs.filter(isFlushed).length === 2), 'no second Flushed');
  sock.sendClose({ type: 'Close' });
  const ev = await closed;
  assert.equal(ev.code, 1000);
  const meta = msgs[0];
  assert.equal(meta.type, 'Metadata');
  assert.match(meta.request_id, UUID);
  assert.equal(meta.model_name, 'aura-2-thalia-en');
  assert.equal(typeof meta.model_version, 'string');
  assert.match(meta.model_uuid, UUID);
  const flushed = msgs.filter(isFlushed).map((m) => m.sequence_id);
  assert.deepEqual(flushed, [0, 1]);
  const firstFlush = msgs.findIndex(isFlushed);
  const audioBefore = msgs.slice(1, firstFlush).filter((m) => !(m && m.type));
  assert.ok(audioBefore.length >= 1, 'no audio before the first Flushed');
});

test('raw linear16 over ws: audio bytes length matches the sample rate, no RIFF header', async (t) => {
  if (skip) return t.skip(skip);
  const lengths = {};
  for (const rate of [16000, 48000]) {
    const c = open(`model=aura-asteria-en&encoding=linear16&sample_rate=${rate}`);
    await c.opened;
    c.ws.send(JSON.stringify({ type: 'Speak', text: 'Testing one two three.' }));
    c.ws.send(JSON.stringify({ type: 'Flush' }));
    assert.ok(await waitFor(() => c.events.some((e) => e.json && e.json.type === 'Flushed')));
    c.ws.send(JSON.stringify({ type: 'Close' }));
    assert.equal((await c.closed).code, 1000);
    const audio = Buffer.concat(c.events.filter((e) => e.bytes).map((e) => e.bytes));
    assert.notEqual(audio.toString('latin1', 0, 4), 'RIFF');
    assert.equal(audio.length % 2, 0);
    lengths[rate] = audio.length;
  }
  const ratio = lengths[48000] / lengths[16000];
  assert.ok(ratio > 2.9 && ratio < 3.1, `48k/16k byte ratio ${ratio}`);
});

test('mulaw over ws: one byte per sample at 8 kHz', async (t) => {
  if (skip) return t.skip(skip);
  const c = open('model=aura-asteria-en&encoding=mulaw&sample_rate=8000');
  await c.opened;
  c.ws.send(JSON.stringify({ type: 'Speak', text: 'Testing one two three.' }));
  c.ws.send(JSON.stringify({ type: 'Close' }));
  assert.equal((await c.closed).code, 1000);
  const audio = Buffer.concat(c.events.filter((e) => e.bytes).map((e) => e.bytes));
  assert.ok(audio.length > 4000 && audio.length < 40000, `${audio.length} bytes`);
});

test('Clear during a long synthesis: Cleared arrives, audio stops, later text still speaks', async (t) => {
  if (skip) return t.skip(skip);
  const c = open('model=aura-asteria-en&encoding=linear16&sample_rate=24000');
  await c.opened;
  const long = Array.from({ length: 40 }, (_, i) => `This is sentence number ${i + 1} of a long text.`).join(' ');
  c.ws.send(JSON.stringify({ type: 'Speak', text: long }));
  c.ws.send(JSON.stringify({ type: 'Flush' }));
  assert.ok(await waitFor(() => c.events.some((e) => e.bytes)), 'no audio started');
  c.ws.send(JSON.stringify({ type: 'Clear' }));
  assert.ok(await waitFor(() => c.events.some((e) => e.json && e.json.type === 'Cleared')), 'no Cleared');
  const iCleared = c.events.findIndex((e) => e.json && e.json.type === 'Cleared');
  assert.equal(c.events[iCleared].json.sequence_id, 0);
  await new Promise((r) => setTimeout(r, 500));
  const after = c.events.slice(iCleared + 1).filter((e) => e.bytes);
  assert.equal(after.length, 0, 'audio kept coming after Cleared');
  const before = Buffer.concat(c.events.slice(0, iCleared).filter((e) => e.bytes).map((e) => e.bytes)).length;
  assert.ok(before < 40 * 2 * 24000 * 2, 'the whole text was spoken despite Clear');
  // the cleared flush is never acknowledged; a new one is
  assert.ok(!c.events.some((e) => e.json && e.json.type === 'Flushed'));
  c.ws.send(JSON.stringify({ type: 'Speak', text: 'Back again.' }));
  c.ws.send(JSON.stringify({ type: 'Flush' }));
  assert.ok(await waitFor(() => c.events.some((e) => e.json && e.json.type === 'Flushed')));
  c.ws.send(JSON.stringify({ type: 'Close' }));
  assert.equal((await c.closed).code, 1000);
});

test('warnings for what the socket cannot use; it stays open', async (t) => {
  if (skip) return t.skip(skip);
  const c = open('model=aura-asteria-en');
  await c.opened;
  c.ws.send('not json');
  c.ws.send(JSON.stringify({ type: 'Dance' }));
  c.ws.send(Buffer.from([1, 2, 3]));
  c.ws.send(JSON.stringify({ type: 'Speak' }));
  assert.ok(await waitFor(() => c.events.filter((e) => e.json && e.json.type === 'Warning').length === 4));
  for (const e of c.events.filter((x) => x.json && x.json.type === 'Warning')) {
    assert.equal(typeof e.json.description, 'string');
    assert.equal(typeof e.json.code, 'string');
  }
  assert.equal(c.ws.readyState, WebSocket.OPEN);
  c.ws.send(JSON.stringify({ type: 'Close' }));
  assert.equal((await c.closed).code, 1000);
});

test('handshake errors are HTTP 400 before the upgrade', async (t) => {
  if (skip) return t.skip(skip);
  for (const q of ['encoding=mp3', 'encoding=linear16&sample_rate=11025', 'model=no-such-voice', 'container=wav']) {
    const c = open(q);
    await assert.rejects(c.opened, /HTTP 400/, q);
  }
});
