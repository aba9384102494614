// whisper.test.mjs - Deepgram pre-recorded and live /listen on a Whisper
// model through the official @deepgram/sdk: the server finds two
// random-weight whisper.cpp files the project writes (`parley gen-model
// --arch whisper --shape nano|nano.en`) in its models directory, so nova-3
// and every other Deepgram name run on the multilingual one. Random weights
// say nothing about words: the checks are of shape and consistency (the
// model named in the metadata and /models, punctuated words that are the
// transcript, word times in order inside the audio, the detected language,
// key terms reaching the decoder as its prompt, languages checked against
// the model, interim and final results of a live socket in their spans).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DeepgramClient } from '@deepgram/sdk';
import { startServer, runCli } from '../lib/server.mjs';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
let srv, dg, dir, wav, pcm, skip = null;

function wavOf(p, rate = 16000) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0); h.writeUInt32LE(36 + p.length, 4); h.write('WAVE', 8); h.write('fmt ', 12);
  h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(1, 22); h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28); h.writeUInt16LE(2, 32); h.writeUInt16LE(16, 34); h.write('data', 36); h.writeUInt32LE(p.length, 40);
  return Buffer.concat([h, p]);
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-dg-whisper-'));
  for (const shape of ['nano', 'nano.en']) {
    const r = await runCli(['gen-model', path.join(dir, `ggml-${shape}.bin`), '--arch', 'whisper', '--shape', shape,
      '--type', 'F16']);
    assert.equal(r.code, 0, r.stderr);
  }
  srv = await startServer({ args: ['--models-dir', dir] });
  dg = new DeepgramClient({ apiKey: 'k', baseUrl: `${srv.url}/deepgram` });
  const probe = await fetch(`${srv.url}/deepgram/v1/models`);
  if (probe.status === 404) { skip = 'this binary has no Deepgram routes'; return; }
  const res = await fetch(`${srv.url}/deepgram/v1/speak?model=aura-orion-en&encoding=linear16&sample_rate=16000&container=none`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Token k' },
    body: JSON.stringify({ text: 'Go forward ten meters. Then turn left and stop.' }),
  });
  if (res.status !== 200) { skip = `speech engines unavailable: ${await res.text()}`; return; }
  const speech = Buffer.from(await res.arrayBuffer());
  pcm = Buffer.concat([Buffer.alloc(8000), speech, Buffer.alloc(16000)]);
  wav = wavOf(pcm);
});
after(async () => {
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const seconds = () => pcm.length / 32000;

function checkWords(alt, from, to) {
  assert.ok(alt.words.length >= 1, JSON.stringify(alt));
  let prev = from;
  for (const w of alt.words) {
    assert.ok(w.word.length > 0 && w.word === w.word.toLowerCase(), `word ${JSON.stringify(w)}`);
    assert.ok(w.start >= prev - 1e-6 && w.end >= w.start && w.end <= to + 0.01, `word ${JSON.stringify(w)} in ${from}..${to}`);
    assert.ok(w.confidence >= 0 && w.confidence <= 1);
    prev = w.start;
  }
}

test('Deepgram /models lists the Whisper files first, then pocketsphinx', async (t) => {
  if (skip) return t.skip(skip);
  const m = await dg.manage.v1.models.list();
  assert.deepEqual(m.stt.map((x) => x.name), ['whisper-nano', 'whisper-nano.en', 'pocketsphinx-en-us']);
  assert.equal(m.stt[0].architecture, 'whisper');
  assert.equal(m.stt[0].formatted_output, true);
  assert.match(m.stt[0].uuid, UUID);
});

test('pre-recorded nova-3 runs on the Whisper default: its punctuated words are the transcript', async (t) => {
  if (skip) return t.skip(skip);
  const r = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3', punctuate: true });
  const m = r.metadata;
  assert.equal(m.model_info[m.models[0]].name, 'whisper-nano');
  assert.equal(m.model_info[m.models[0]].arch, 'whisper');
  const models = await dg.manage.v1.models.list();
  assert.equal(models.stt[0].uuid, m.models[0]);
  assert.ok(Math.abs(m.duration - seconds()) < 0.01);
  const alt = r.results.channels[0].alternatives[0];
  checkWords(alt, 0, m.duration);
  for (const w of alt.words) assert.equal(typeof w.punctuated_word, 'string');
  assert.equal(alt.transcript, alt.words.map((w) => w.punctuated_word).join(' '));
  // without punctuate: the plain words, the same decode
  const plain = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3' });
  const pa = plain.results.channels[0].alternatives[0];
  assert.equal(pa.transcript, alt.words.map((w) => w.word).join(' '));
  assert.deepEqual(pa.words.map((w) => [w.word, w.start, w.end]), alt.words.map((w) => [w.word, w.start, w.end]));
  assert.equal(pa.words[0].punctuated_word, undefined);
});

test('detect_language reports the language Whisper detected; pocketsphinx warns instead', async (t) => {
  if (skip) return t.skip(skip);
  const r = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3', detect_language: true });
  const ch = r.results.channels[0];
  assert.match(ch.detected_language, /^[a-z]{2,3}$/);
  assert.ok(ch.language_confidence > 0 && ch.language_confidence <= 1);
  assert.ok(!(r.metadata.warnings || []).some((w) => w.parameter === 'detect_language'));
  // a given language is used, not detected
  const de = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3', language: 'de' });
  assert.ok(de.results.channels[0].alternatives[0].words.length >= 0);
  await assert.rejects(dg.listen.v1.media.transcribeFile(wav, { model: 'whisper-nano.en', language: 'de' }),
    (e) => e.statusCode === 400 && /English/.test(JSON.stringify(e.body)));
  const ps = await dg.listen.v1.media.transcribeFile(wav, { model: 'pocketsphinx', detect_language: true });
  assert.equal(ps.results.channels[0].detected_language, undefined);
  assert.ok(ps.metadata.warnings.some((w) => w.parameter === 'detect_language'));
});

test('keyterm reaches Whisper as its prompt (no warning); pocketsphinx warns', async (t) => {
  if (skip) return t.skip(skip);
  const plain = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3', punctuate: true });
  const kt = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3', punctuate: true, keyterm: ['Parley', 'pocketsphinx'] });
  assert.ok(!(kt.metadata.warnings || []).some((w) => w.parameter === 'keyterm'));
  const sig = (r) => { const a = r.results.channels[0].alternatives[0]; return [a.transcript, a.confidence]; };
  assert.notDeepEqual(sig(kt), sig(plain), 'the key terms changed nothing');
  const ps = await dg.listen.v1.media.transcribeFile(wav, { model: 'pocketsphinx', keyterm: ['Parley'] });
  assert.ok(ps.metadata.warnings.some((w) => w.parameter === 'keyterm'));
});

test('live on Whisper: interim results, then a final whose words lie inside its span; Metadata and close 1000', async (t) => {
  if (skip) return t.skip(skip);
  const sock = await dg.listen.v1.createConnection({ model: 'nova-3', encoding: 'linear16', sample_rate: 16000,
    interim_results: 'true', punctuate: 'true', endpointing: 'false' });
  const msgs = [];
  sock.on('message', (m) => msgs.push(m));
  const closed = new Promise((resolve) => sock.on('close', resolve));
  sock.connect();
  await sock.waitForOpen();
  // at real time, so the interim results come while the audio does
  for (let i = 0; i < pcm.length; i += 3200) {
    sock.sendMedia(pcm.subarray(i, i + 3200));
    await new Promise((r) => setTimeout(r, 100));
  }
  sock.sendCloseStream({ type: 'CloseStream' });
  const ev = await closed;
  assert.equal(ev.code, 1000);
  const results = msgs.filter((m) => m.type === 'Results');
  const interims = results.filter((m) => !m.is_final), finals = results.filter((m) => m.is_final);
  assert.ok(interims.length >= 1, `no interim in ${msgs.map((m) => m.type)}`);
  assert.ok(finals.length >= 1);
  for (const r of results) {
    assert.equal(r.metadata.model_info.name, 'whisper-nano');
    assert.equal(r.metadata.model_info.arch, 'whisper');
  }
  for (const m of interims) assert.equal(typeof m.channel.alternatives[0].transcript, 'string');
  assert.ok(interims.some((m) => m.channel.alternatives[0].transcript.length > 0), 'every interim was empty');
  const spoken = finals.filter((f) => f.channel.alternatives[0].words.length);
  assert.ok(spoken.length >= 1);
  for (const f of spoken) {
    const alt = f.channel.alternatives[0];
    checkWords(alt, f.start, f.start + f.duration);
    assert.equal(alt.transcript, alt.words.map((w) => w.punctuated_word).join(' '));
  }
  const meta = msgs.at(-1);
  assert.equal(meta.type, 'Metadata');
  assert.ok(Math.abs(meta.duration - seconds()) < 0.05);
});
