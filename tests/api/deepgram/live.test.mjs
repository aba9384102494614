// live.test.mjs - Deepgram live transcription over WebSocket
// (../shared/specs/deepgram.md section 4, checks 22-28 of section 11): the
// official @deepgram/sdk streaming a WAV with CloseStream, and plain `ws`
// clients for what needs close codes and message order (raw PCM in 100 ms
// chunks, interim results, endpointing, SpeechStarted, UtteranceEnd,
// Finalize, KeepAlive and the idle timeout, undecodable audio, auth).
//
// Audio: two sentences from the server's own /speak (aura-orion-en, the
// flite voice pocketsphinx reads best) with 1.5 s of silence between them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { DeepgramClient } from '@deepgram/sdk';
import { startServer } from '../lib/server.mjs';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
let srv, dg, wsBase, pcm, wav, skip = null;

async function speak(text, query) {
  const res = await fetch(`${srv.url}/deepgram/v1/speak?model=aura-orion-en&${query}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Token k' }, body: JSON.stringify({ text }),
  });
  assert.equal(res.status, 200);
  return Buffer.from(await res.arrayBuffer());
}

function wavOf(p, rate = 16000) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0); h.writeUInt32LE(36 + p.length, 4); h.write('WAVE', 8); h.write('fmt ', 12);
  h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(1, 22); h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28); h.writeUInt16LE(2, 32); h.writeUInt16LE(16, 34); h.write('data', 36); h.writeUInt32LE(p.length, 40);
  return Buffer.concat([h, p]);
}

before(async () => {
  srv = await startServer();
  dg = new DeepgramClient({ apiKey: 'k', baseUrl: `${srv.url}/deepgram` });
  wsBase = `ws://127.0.0.1:${srv.port}/deepgram/v1/listen`;
  const probe = await fetch(`${srv.url}/deepgram/v1/models`);
  if (probe.status === 404) { skip = 'this binary has no Deepgram routes'; return; }
  const a = await speak('Go forward ten meters.', 'encoding=linear16&sample_rate=16000&container=none');
  const b = await speak('Turn left and stop.', 'encoding=linear16&sample_rate=16000&container=none');
  pcm = Buffer.concat([Buffer.alloc(8000), a, Buffer.alloc(48000), b, Buffer.alloc(16000)]);
  wav = wavOf(pcm);
});
after(async () => {
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
});

// A ws client that records every message and the close.
function open(query, protocols) {
  const ws = new WebSocket(`${wsBase}?${query}`, protocols, { headers: protocols ? {} : { Authorization: 'Token k' } });
  const msgs = [];
  const closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('message', (d, isBinary) => { if (!isBinary) msgs.push(JSON.parse(d.toString())); });
  const opened = new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('error', reject); ws.on('unexpected-response', (req, res) => reject(new Error(`HTTP ${res.statusCode}`))); });
  return { ws, msgs, closed, opened };
}

function chunks(buf, size) {
  const out = [];
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size));
  return out;
}

const waitFor = async (pred, ms = 10000) => {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
};

test('SDK: a WAV streamed in 8 KiB chunks with only model, then CloseStream: Results, Metadata, close 1000', async (t) => {
  if (skip) return t.skip(skip);
  const sock = await dg.listen.v1.createConnection({ model: 'nova-3' });
  const msgs = [];
  sock.on('message', (m) => msgs.push(m));
  const closed = new Promise((resolve) => sock.on('close', resolve));
  sock.connect();
  await sock.waitForOpen();
  for (const c of chunks(wav, 8192)) sock.sendMedia(c);
  sock.sendCloseStream({ type: 'CloseStream' });
  const ev = await closed;
  assert.equal(ev.code, 1000);
  const results = msgs.filter((m) => m.type === 'Results');
  assert.ok(results.length >= 1);
  const text = results.map((r) => r.channel.alternatives[0].transcript).join(' ');
  assert.match(text, /forward/);
  assert.match(text, /left|stop|turn/);
  for (const r of results) {
    assert.deepEqual(r.channel_index, [0, 1]);
    assert.equal(r.is_final, true);
    for (const k of ['name', 'version', 'arch']) assert.equal(typeof r.metadata.model_info[k], 'string');
    assert.match(r.metadata.request_id, UUID);
  }
  const meta = msgs[msgs.length - 1];
  assert.equal(meta.type, 'Metadata');
  for (const k of ['transaction_key', 'request_id', 'sha256', 'created', 'duration', 'channels']) assert.ok(k in meta, k);
  assert.ok(Math.abs(meta.duration - pcm.length / 32000) < 0.05, `duration ${meta.duration}`);
  assert.ok(!Number.isNaN(Date.parse(meta.created)));
  // no reconnect after an orderly close (the access log line of the closed
  // socket may come a little after the close itself)
  await new Promise((r) => setTimeout(r, 500));
  const upgrades = (srv.log().match(/GET \/deepgram\/v1\/listen/g) || []).length;
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal((srv.log().match(/GET \/deepgram\/v1\/listen/g) || []).length, upgrades);
});

test('raw linear16 in 100 ms chunks: two finals with contiguous spans, words inside them, speech_final at the pause', async (t) => {
  if (skip) return t.skip(skip);
  const c = open('model=nova-3&encoding=linear16&sample_rate=16000&channels=1&punctuate=true');
  await c.opened;
  for (const ch of chunks(pcm, 3200)) c.ws.send(ch);
  c.ws.send(JSON.stringify({ type: 'CloseStream' }));
  const cl = await c.closed;
  assert.equal(cl.code, 1000);
  const finals = c.msgs.filter((m) => m.type === 'Results' && m.is_final);
  const spoken = finals.filter((m) => m.channel.alternatives[0].words.length);
  assert.ok(spoken.length >= 2, JSON.stringify(finals.map((f) => f.channel.alternatives[0].transcript)));
  assert.equal(spoken[0].speech_final, true);
  for (let i = 1; i < finals.length; i++)
    assert.ok(Math.abs(finals[i].start - (finals[i - 1].start + finals[i - 1].duration)) < 1e-6, 'finals must be contiguous');
  for (const f of spoken)
    for (const w of f.channel.alternatives[0].words) {
      assert.ok(w.start >= f.start - 1e-6 && w.end <= f.start + f.duration + 1e-6, `${JSON.stringify(w)} outside [${f.start}, +${f.duration}]`);
      assert.equal(typeof w.punctuated_word, 'string');
    }
});

test('interim results, vad_events and utterance_end_ms: SpeechStarted first, interims before the final of the same start, UtteranceEnd', async (t) => {
  if (skip) return t.skip(skip);
  const c = open('model=nova-3&encoding=linear16&sample_rate=16000&interim_results=true&endpointing=300&vad_events=true&utterance_end_ms=1000');
  await c.opened;
  for (const ch of chunks(pcm, 3200)) c.ws.send(ch);
  c.ws.send(JSON.stringify({ type: 'CloseStream' }));
  assert.equal((await c.closed).code, 1000);
  const types = c.msgs.map((m) => m.type);
  assert.equal(types[0], 'SpeechStarted');
  const ss = c.msgs[0];
  assert.deepEqual(ss.channel, [0, 1]);
  assert.equal(typeof ss.timestamp, 'number');
  const interims = c.msgs.filter((m) => m.type === 'Results' && !m.is_final);
  assert.ok(interims.length >= 1);
  const firstFinal = c.msgs.find((m) => m.type === 'Results' && m.is_final && m.channel.alternatives[0].words.length);
  assert.ok(interims.some((m) => m.start === firstFinal.start));
  const ue = c.msgs.find((m) => m.type === 'UtteranceEnd');
  assert.ok(ue, `no UtteranceEnd in ${types.join(',')}`);
  assert.deepEqual(ue.channel, [0, 1]);
  assert.ok(typeof ue.last_word_end === 'number' && ue.last_word_end > 0);
  assert.ok(types.indexOf('UtteranceEnd') > types.indexOf('Results'));
  assert.ok(types.filter((x) => x === 'SpeechStarted').length >= 2, 'a second utterance starts after the pause');
});

test('multichannel: each channel of a stereo stream gets its own results and channel_index', async (t) => {
  if (skip) return t.skip(skip);
  const left = await speak('Go forward ten meters.', 'encoding=linear16&sample_rate=16000&container=none');
  const right = await speak('Turn left and stop.', 'encoding=linear16&sample_rate=16000&container=none');
  const n = Math.max(left.length, right.length) / 2 + 8000;
  const st = Buffer.alloc(n * 4);
  for (let i = 0; i < left.length / 2; i++) st.writeInt16LE(left.readInt16LE(2 * i), 4 * (i + 4000));
  for (let i = 0; i < right.length / 2; i++) st.writeInt16LE(right.readInt16LE(2 * i), 4 * (i + 4000) + 2);
  const c = open('model=nova-3&encoding=linear16&sample_rate=16000&channels=2&multichannel=true&vad_events=true');
  await c.opened;
  for (const ch of chunks(st, 6400)) c.ws.send(ch);
  c.ws.send(JSON.stringify({ type: 'CloseStream' }));
  assert.equal((await c.closed).code, 1000);
  const results = c.msgs.filter((m) => m.type === 'Results');
  const text = (k) => results.filter((m) => m.channel_index[0] === k).map((m) => m.channel.alternatives[0].transcript).join(' ');
  for (const m of results) assert.equal(m.channel_index[1], 2);
  assert.match(text(0), /forward|meters/);
  assert.doesNotMatch(text(0), /stop/);
  assert.match(text(1), /left|stop|turn/);
  assert.doesNotMatch(text(1), /forward/);
  assert.ok(c.msgs.some((m) => m.type === 'SpeechStarted' && m.channel[0] === 1 && m.channel[1] === 2));
  assert.equal(c.msgs[c.msgs.length - 1].channels, 2);
});

test('Finalize: a final with from_finalize true, and the socket keeps taking audio', async (t) => {
  if (skip) return t.skip(skip);
  const c = open('model=nova-3&encoding=linear16&sample_rate=16000&endpointing=false');
  await c.opened;
  const half = pcm.subarray(0, 8000 + 2 * Math.floor((pcm.length / 2 - 40000) / 2));
  for (const ch of chunks(half, 3200)) c.ws.send(ch);
  c.ws.send(JSON.stringify({ type: 'Finalize' }));
  assert.ok(await waitFor(() => c.msgs.some((m) => m.type === 'Results' && m.from_finalize)), 'no from_finalize result');
  const f = c.msgs.find((m) => m.from_finalize);
  assert.equal(f.is_final, true);
  assert.match(f.channel.alternatives[0].transcript, /forward/);
  c.ws.send(JSON.stringify({ type: 'KeepAlive' }));
  for (const ch of chunks(pcm.subarray(half.length), 3200)) c.ws.send(ch);
  c.ws.send(JSON.stringify({ type: 'CloseStream' }));
  assert.equal((await c.closed).code, 1000);
  const after = c.msgs.filter((m) => m.type === 'Results' && m.start >= f.start + f.duration - 1e-6);
  assert.ok(after.some((m) => /left|stop|turn/.test(m.channel.alternatives[0].transcript)));
});

test('a container stream without encoding (mp3, ogg/opus) is decoded as it arrives', async (t) => {
  if (skip) return t.skip(skip);
  for (const enc of ['mp3', 'opus']) {
    const audio = await speak('Go forward ten meters. Turn left and stop.', `encoding=${enc}`);
    const c = open('model=nova-3');
    await c.opened;
    for (const ch of chunks(audio, 4096)) c.ws.send(ch);
    c.ws.send(JSON.stringify({ type: 'CloseStream' }));
    assert.equal((await c.closed).code, 1000, enc);
    const text = c.msgs.filter((m) => m.type === 'Results').map((m) => m.channel.alternatives[0].transcript).join(' ');
    assert.match(text, /forward|meters|left|stop/, `${enc}: '${text}'`);
    const meta = c.msgs.find((m) => m.type === 'Metadata');
    assert.ok(meta.duration > 1.5, `${enc}: duration ${meta.duration}`);
  }
});

test('undecodable audio without encoding: close 1002 DATA-0000, and the server still serves', async (t) => {
  if (skip) return t.skip(skip);
  const c = open('model=nova-3');
  await c.opened;
  for (const ch of chunks(randomBytes(64 * 1024), 4096)) c.ws.send(ch);
  c.ws.send(JSON.stringify({ type: 'CloseStream' }));
  const cl = await c.closed;
  assert.ok(cl.code === 1002 || cl.code === 1008, `close ${cl.code}`);
  assert.match(cl.reason, /DATA-0000/);
  const again = open('model=nova-3&encoding=linear16&sample_rate=16000');
  await again.opened;
  again.ws.send(JSON.stringify({ type: 'CloseStream' }));
  assert.equal((await again.closed).code, 1000);
});

test('hostile WAV headers on the live socket: a clean close or results, never a crash', async (t) => {
  if (skip) return t.skip(skip);
  const hdr = (mutate) => { const w = Buffer.from(wav.subarray(0, 44 + 32000)); mutate(w); return w; };
  const cases = [
    hdr((w) => w.writeUInt16LE(0, 22)),            // 0 channels
    hdr((w) => w.writeUInt32LE(4000000, 24)),      // 4 MHz
    hdr((w) => w.writeUInt16LE(3, 20)),            // float format tag, 16 bits
    hdr((w) => w.writeUInt32LE(0x7fffffff, 16)),   // absurd fmt chunk size
    Buffer.concat([Buffer.from('RIFF\xff\xff\xff\xffWAVE', 'latin1'), randomBytes(40000)]),
  ];
  for (const [i, audio] of cases.entries()) {
    const c = open('model=nova-3');
    await c.opened;
    for (const ch of chunks(audio, 4096)) c.ws.send(ch);
    c.ws.send(JSON.stringify({ type: 'CloseStream' }));
    const cl = await c.closed;
    assert.ok([1000, 1002, 1008].includes(cl.code), `case ${i}: close ${cl.code} ${cl.reason}`);
  }
  const h = await fetch(`${srv.url}/health`);
  assert.equal(h.status, 200);
});

test('handshake: bad parameters are an HTTP 400 before any upgrade; token subprotocol is echoed', async (t) => {
  if (skip) return t.skip(skip);
  const bad = open('model=nova-3&encoding=linear16');
  await assert.rejects(bad.opened, /HTTP 400/);
  const bad2 = open('model=nova-3&interim_results=sometimes');
  await assert.rejects(bad2.opened, /HTTP 400/);
  const c = open('model=nova-3', ['token', 'k', 'x-deepgram-session-id', '3b3e0f9c-0000-4000-8000-000000000001']);
  await c.opened;
  assert.equal(c.ws.protocol, 'token');
  c.ws.send(JSON.stringify({ type: 'CloseStream' }));
  assert.equal((await c.closed).code, 1000);
});

test('KeepAlive keeps an idle socket open; 10 s of nothing closes it with 1011 NET-0001', async (t) => {
  if (skip) return t.skip(skip);
  const c = open('model=nova-3&encoding=linear16&sample_rate=16000');
  await c.opened;
  const t0 = Date.now();
  for (let i = 0; i < 4; i++) {
    await new Promise((r) => setTimeout(r, 3000));
    c.ws.send(JSON.stringify({ type: 'KeepAlive' }));
  }
  assert.equal(c.ws.readyState, WebSocket.OPEN, 'closed despite KeepAlive');
  assert.equal(c.msgs.length, 0, 'KeepAlive must not be answered');
  const cl = await c.closed;
  assert.equal(cl.code, 1011);
  assert.match(cl.reason, /NET-0001/);
  const idle = Date.now() - t0 - 12000;
  assert.ok(idle > 9000 && idle < 13000, `closed after ${idle} ms of silence`);
});
