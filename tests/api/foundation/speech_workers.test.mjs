// speech_workers.test.mjs - the speech engines run in worker processes
// (docs/speech.md, "Worker isolation"; issue 25 item 1): an input that
// crashes libespeak-ng, a worker killed in the middle of a synthesis and a
// worker past its time limit each get a clean answer in the dialect's shape
// (OpenAI /v1/audio/speech through the openai SDK, Deepgram /v1/speak
// through @deepgram/sdk, the Deepgram speak WebSocket), and the server goes
// on: /health answers and the next synthesis speaks, on a fresh worker.
//
// Workers are found as the server's child processes in /proc (Linux). The
// espeak-ng inputs only run when the voice list has espeak:hi; whether
// Debian's libespeak-ng really crashes on them depends on the build (it
// does under the sanitizer build), so either good audio or a 5xx is
// accepted there, and the deterministic crash is a SIGSEGV sent to the
// worker while it synthesizes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import WebSocket from 'ws';
import OpenAI, { APIError } from 'openai';
import { DeepgramClient, DeepgramError } from '@deepgram/sdk';
import { startServer } from '../lib/server.mjs';

// One sentence with no full stop: tts.c speaks it in one worker call, and
// flite's slt needs seconds of CPU for it (docs/speech.md: CPU RTF ~0.02).
const LONG = 'word '.repeat(390).trim();
const CRASHERS = ['☃☃', '©©', '😀😀'];
// How the server names the worker's death: the signal, or under the
// sanitizer build (whose handler catches SIGSEGV) the exit status.
const DIED = /worker process (was killed by signal 11 \(Segmentation fault\)|exited with status \d+) while handling this request/;
let srv, slow, skip = null, voices = [];

before(async () => {
  srv = await startServer();
  const probe = await fetch(`${srv.url}/v1/audio/voices`);
  if (probe.status !== 200) { skip = `speech engines unavailable: ${probe.status} ${await probe.text()}`; return; }
  voices = (await probe.json()).data.map((v) => v.id);
  slow = await startServer({ args: ['--speech-timeout', '1'] });
});
after(async () => {
  for (const s of [srv, slow]) {
    if (!s) continue;
    const log = s.log;
    const code = await s.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
});

const openai = (s) => new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
// The Deepgram SDK retries every 5xx twice by default; the tests look at the
// first answer.
const deepgram = (s) => new DeepgramClient({ apiKey: 'k', baseUrl: `${s.url}/deepgram`, maxRetries: 0 });

async function openaiSpeech(s, voice, input) {
  const res = await openai(s).audio.speech.create({ model: 'tts-1', voice, input, response_format: 'wav' });
  return Buffer.from(await res.arrayBuffer());
}
async function deepgramSpeech(s, model, text) {
  const res = await deepgram(s).speak.v1.audio.generate({ text, model, encoding: 'linear16', container: 'wav' });
  return Buffer.from(await res.arrayBuffer());
}

// The server's speech worker processes: children whose command line is
// `parley __worker speech`.
function workers(s) {
  const out = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'latin1').split('\0');
      if (ppid === s.proc.pid && cmd[1] === '__worker' && cmd[2] === 'speech') out.push(Number(d));
    } catch { /* the process ended meanwhile */ }
  }
  return out;
}

// The server is alive, /health answers, and a second synthesis speaks (a
// real WAV with samples) in both dialects.
async function stillServes(s) {
  assert.equal(s.proc.exitCode, null, `the server exited:\n${s.log().slice(-3000)}`);
  const h = await fetch(`${s.url}/health`);
  assert.equal(h.status, 200);
  assert.equal((await h.json()).status, 'ok');
  for (const wav of [await openaiSpeech(s, 'alloy', 'Hello there.'), await deepgramSpeech(s, 'aura-asteria-en', 'Hello there.')]) {
    assert.equal(wav.toString('latin1', 0, 4), 'RIFF');
    assert.ok(wav.length > 44 + 8000, `${wav.length} bytes of WAV`);
  }
}

// Starts fn (a synthesis of LONG), waits until a worker is busy on it, and
// sends every speech worker SIGSEGV, as a crash inside the engine would.
async function crashDuring(s, fn) {
  const before = new Set(workers(s));
  const pending = fn().then((v) => ({ v }), (e) => ({ e }));
  await new Promise((r) => setTimeout(r, 700));
  const killed = workers(s);
  assert.ok(killed.length > 0, 'no speech worker process is running');
  for (const pid of killed) process.kill(pid, 'SIGSEGV');
  const res = await pending;
  return { ...res, killed, before };
}

test('the espeak-ng inputs that crash libespeak-ng: audio or a 5xx in each dialect, and the server goes on', async (t) => {
  if (skip) return t.skip(skip);
  if (!voices.includes('espeak:hi')) return t.skip('espeak-ng (espeak:hi) is not installed');
  for (const text of CRASHERS) {
    try {
      const wav = await openaiSpeech(srv, 'espeak:hi', text);
      assert.equal(wav.toString('latin1', 0, 4), 'RIFF', `OpenAI ${text}`);
    } catch (e) {
      assert.ok(e instanceof APIError && e.status >= 500, `OpenAI ${text}: ${e}`);
      assert.equal(e.error.type, 'server_error');
      assert.match(e.error.message, /text-to-speech worker/);
    }
    try {
      const wav = await deepgramSpeech(srv, 'espeak:hi', text);
      assert.equal(wav.toString('latin1', 0, 4), 'RIFF', `Deepgram ${text}`);
    } catch (e) {
      assert.ok(e instanceof DeepgramError && e.statusCode >= 500, `Deepgram ${text}: ${e}`);
      assert.equal(typeof e.body.err_code, 'string');
      assert.match(e.body.err_msg, /text-to-speech worker/);
    }
    await stillServes(srv);
  }
});

test('OpenAI /v1/audio/speech: a worker crash mid-synthesis is a 500 server_error naming the signal; a fresh worker speaks next', async (t) => {
  if (skip) return t.skip(skip);
  await openaiSpeech(srv, 'slt', 'Warm up.'); // a worker with the voices loaded
  const { e, v, killed } = await crashDuring(srv, () => openaiSpeech(srv, 'slt', LONG));
  assert.ok(e, `expected an error, got ${v && v.length} bytes`);
  assert.ok(e instanceof APIError, String(e));
  assert.equal(e.status, 500);
  assert.equal(e.error.type, 'server_error');
  assert.match(e.error.message, /^the text-to-speech worker/);
  assert.match(e.error.message, DIED);
  assert.equal(e.headers.get('x-should-retry'), 'false');
  await stillServes(srv);
  const now = workers(srv);
  assert.ok(now.length > 0 && now.every((pid) => !killed.includes(pid)), `workers ${now} after killing ${killed}`);
});

test('Deepgram /v1/speak: a worker crash mid-synthesis is a 500 with err_code INTERNAL_SERVER_ERROR', async (t) => {
  if (skip) return t.skip(skip);
  const { e, v } = await crashDuring(srv, () => deepgramSpeech(srv, 'slt', LONG));
  assert.ok(e, `expected an error, got ${v && v.length} bytes`);
  assert.ok(e instanceof DeepgramError, String(e));
  assert.equal(e.statusCode, 500);
  assert.equal(e.body.err_code, 'INTERNAL_SERVER_ERROR');
  assert.match(e.body.err_msg, DIED);
  assert.match(e.body.request_id, /^[0-9a-f-]{36}$/);
  await stillServes(srv);
});

test('Deepgram speak WebSocket: a worker crash is a Warning SYNTHESIS_FAILED and close 1011; a new socket speaks', async (t) => {
  if (skip) return t.skip(skip);
  const open = () => {
    const ws = new WebSocket(`ws://127.0.0.1:${srv.port}/deepgram/v1/speak?model=slt&encoding=linear16&sample_rate=16000`,
      { headers: { Authorization: 'Token k' } });
    const events = [];
    ws.on('message', (d, bin) => events.push(bin ? { bytes: d.length } : { json: JSON.parse(d.toString()) }));
    const closed = new Promise((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    const opened = new Promise((r, j) => { ws.on('open', r); ws.on('error', j); });
    return { ws, events, closed, opened };
  };
  const c = open();
  await c.opened;
  const { v } = await crashDuring(srv, async () => {
    c.ws.send(JSON.stringify({ type: 'Speak', text: LONG }));
    c.ws.send(JSON.stringify({ type: 'Flush' }));
    return c.closed;
  });
  assert.equal(v.code, 1011, JSON.stringify(v));
  assert.match(v.reason, /^SYNTHESIS_FAILED/);
  const warning = c.events.find((ev) => ev.json && ev.json.type === 'Warning');
  assert.ok(warning, JSON.stringify(c.events.filter((ev) => ev.json)));
  assert.equal(warning.json.code, 'SYNTHESIS_FAILED');
  assert.match(warning.json.description, DIED);
  assert.ok(!c.events.some((ev) => ev.json && ev.json.type === 'Flushed'));
  const d = open();
  await d.opened;
  d.ws.send(JSON.stringify({ type: 'Speak', text: 'Hello again.' }));
  d.ws.send(JSON.stringify({ type: 'Close' }));
  assert.equal((await d.closed).code, 1000);
  assert.ok(d.events.filter((ev) => ev.bytes).reduce((a, ev) => a + ev.bytes, 0) > 8000);
  await stillServes(srv);
});

test('--speech-timeout 1: a synthesis past the limit is a 504 in each dialect; the worker is killed and replaced', async (t) => {
  if (skip) return t.skip(skip);
  await openaiSpeech(slow, 'slt', 'Warm up.');
  const first = workers(slow);
  await assert.rejects(openaiSpeech(slow, 'slt', LONG), (e) => {
    assert.ok(e instanceof APIError, String(e));
    assert.equal(e.status, 504);
    assert.equal(e.error.type, 'server_error');
    assert.equal(e.error.code, 'timeout');
    assert.match(e.error.message, /the text-to-speech worker took longer than 1\.0 s and was stopped/);
    return true;
  });
  await assert.rejects(deepgramSpeech(slow, 'slt', LONG), (e) => {
    assert.ok(e instanceof DeepgramError, String(e));
    assert.equal(e.statusCode, 504);
    assert.equal(e.body.err_code, 'TIMEOUT');
    return true;
  });
  await stillServes(slow);
  const gone = first.filter((pid) => !workers(slow).includes(pid));
  assert.ok(gone.length > 0, `the worker that timed out is still running: ${first} vs ${workers(slow)}`);
});
