// whisper.test.mjs - transcriptions and translations on a Whisper model
// through the official `openai` SDK: the server finds two random-weight
// whisper.cpp files the project writes (`parley gen-model --arch whisper
// --shape nano|nano.en`, real vocabularies and 30 s windows, tiny widths)
// in its models directory. Random weights say nothing about words, so the
// checks are of shape and consistency: every response format against the
// others, segments against their windows, words inside their segments,
// the deltas against the done text, the prompt and the translate task
// changing what is decoded, audio longer than a window decoded across
// windows, the backend choice (the multilingual file is the default, the
// English-only one by name, pocketsphinx by name), and model files that
// are damaged stopping the server with a reason.
//
// temperature=0.2 makes each window one sampled attempt (the random model
// fails every threshold, so the default would try all six temperatures).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI, { toFile, BadRequestError, APIError } from 'openai';
import { startServer, runCli, parseSSE } from '../lib/server.mjs';

let srv, client, dir, clip, long, skip = null;
const T = '0.2';

// A 16-bit mono WAV of pcm (Int16 samples as a Buffer) at rate.
function wavOf(pcm, rate) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1'); h.writeUInt32LE(36 + pcm.length, 4); h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(1, 22); h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28); h.writeUInt16LE(2, 32); h.writeUInt16LE(16, 34); h.write('data', 36, 'latin1');
  h.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([h, pcm]);
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-whisper-'));
  for (const shape of ['nano', 'nano.en']) {
    const r = await runCli(['gen-model', path.join(dir, `ggml-${shape}.bin`), '--arch', 'whisper', '--shape', shape,
      '--type', 'F16']);
    assert.equal(r.code, 0, r.stderr);
  }
  srv = await startServer({ args: ['--models-dir', dir] });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
  const probe = await fetch(`${srv.url}/v1/audio/voices`);
  if (probe.status !== 200) { skip = `speech engines unavailable: ${await probe.text()}`; return; }
  const res = await client.audio.speech.create({ model: 'tts-1', voice: 'echo', response_format: 'pcm',
    input: 'Go forward ten meters. Then turn left and stop.' });
  const pcm = Buffer.from(await res.arrayBuffer()); // 24 kHz s16le
  clip = wavOf(pcm, 24000);
  const pause = Buffer.alloc(24000 * 2); // 1 s of silence between copies
  long = wavOf(Buffer.concat(Array.from({ length: 12 }, () => [pcm, pause]).flat()), 24000);
});
after(async () => {
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function transcribe(extra = {}, audio = clip) {
  return toFile(audio, 'a.wav').then((file) =>
    client.audio.transcriptions.create({ file, model: 'whisper-1', temperature: T, ...extra }));
}

function checkSegments(v, seconds) {
  assert.ok(Array.isArray(v.segments) && v.segments.length >= 1);
  let prevStart = 0;
  v.segments.forEach((s, i) => {
    assert.equal(s.id, i);
    assert.ok(Number.isInteger(s.seek) && s.seek >= 0);
    assert.ok(s.start >= s.seek / 100 - 1e-9, `segment ${i} starts before its window`);
    assert.ok(s.start <= s.end && s.start >= prevStart, `segment ${i} times ${s.start}..${s.end}`);
    assert.ok(s.end <= s.seek / 100 + 30 + 1e-9, `segment ${i} ends past its window`);
    assert.ok(s.start <= seconds + 30);
    assert.ok(s.tokens.length >= 1 && s.tokens.every((t) => Number.isInteger(t) && t >= 0 && t < 50257 + 1));
    assert.equal(s.temperature, 0.2);
    assert.ok(s.avg_logprob <= 0 && s.compression_ratio > 0 && s.no_speech_prob >= 0 && s.no_speech_prob <= 1);
    assert.equal(typeof s.text, 'string');
    prevStart = s.start;
  });
  assert.equal(v.text, v.segments.map((s) => s.text).filter((t) => t).join(' '));
}

test('the default is the Whisper file: /v1/models lists both files and pocketsphinx', async (t) => {
  if (skip) return t.skip(skip);
  const ids = (await client.models.list()).data.filter((m) => m.kind === 'speech-to-text');
  assert.deepEqual(ids.map((m) => m.id), ['whisper-nano', 'whisper-nano.en', 'pocketsphinx-en-us']);
  assert.deepEqual(ids.map((m) => m.default_transcription_model), [true, false, false]);
  assert.equal(ids[0].backend, 'whisper');
  const one = await client.models.retrieve('whisper-nano.en');
  assert.equal(one.backend, 'whisper');
  const v = await transcribe({ response_format: 'verbose_json' });
  assert.ok(v.segments[0].tokens.every((tok) => tok > 255), 'pocketsphinx would number words, not tokens');
});

test('json, text, verbose_json, srt and vtt agree with each other', async (t) => {
  if (skip) return t.skip(skip);
  const j = await transcribe();
  assert.equal(typeof j.text, 'string');
  assert.ok(j.text.length > 0);
  assert.deepEqual(j.usage, { type: 'duration', seconds: Math.ceil(clip.length / 48000 - 44 / 48000) });
  const text = await transcribe({ response_format: 'text' });
  assert.equal(text, `${j.text}\n`);
  const v = await transcribe({ response_format: 'verbose_json', timestamp_granularities: ['word', 'segment'] });
  assert.equal(v.task, 'transcribe');
  assert.equal(typeof v.language, 'string');
  assert.ok(Math.abs(v.duration - (clip.length - 44) / 48000) < 0.02);
  assert.equal(v.text, j.text);
  checkSegments(v, v.duration);
  // words: in order, each inside a segment
  assert.ok(v.words.length >= 1);
  let prev = 0;
  for (const w of v.words) {
    assert.ok(w.word.length > 0 && !w.word.startsWith(' '));
    assert.ok(w.start <= w.end && w.start >= prev - 1e-9, `word ${w.word} ${w.start}..${w.end}`);
    assert.ok(v.segments.some((s) => w.start >= s.start - 1e-9 && w.end <= s.end + 1e-9), `word ${w.word} outside`);
    prev = w.start;
  }
  const srt = await transcribe({ response_format: 'srt' });
  const cues = srt.trim().split('\n\n');
  assert.equal(cues.length, v.segments.length);
  const ts = (x) => { const [h, m, s] = x.replace(',', '.').split(':'); return (+h) * 3600 + (+m) * 60 + (+s); };
  cues.forEach((c, i) => {
    const [n, times, ...body] = c.split('\n');
    assert.equal(n, String(i + 1));
    const [a, b] = times.split(' --> ');
    assert.ok(Math.abs(ts(a) - v.segments[i].start) < 0.0015 && Math.abs(ts(b) - v.segments[i].end) < 0.0015);
    assert.equal(body.join('\n'), v.segments[i].text);
  });
  const vtt = await transcribe({ response_format: 'vtt' });
  assert.ok(vtt.startsWith('WEBVTT\n\n'));
  assert.equal(vtt.trim().split('\n\n').length - 1, v.segments.length);
});

test('stream=true: the deltas concatenate to the done text, which is the json text', async (t) => {
  if (skip) return t.skip(skip);
  const j = await transcribe();
  const stream = await transcribe({ stream: true });
  let deltas = '', done = null;
  for await (const ev of stream) {
    if (ev.type === 'transcript.text.delta') deltas += ev.delta;
    else if (ev.type === 'transcript.text.done') done = ev.text;
  }
  assert.equal(deltas, done);
  assert.equal(done, j.text);
});

test('prompt conditions the decoding; language is checked against the model', async (t) => {
  if (skip) return t.skip(skip);
  const plain = await transcribe({ response_format: 'verbose_json' });
  const prompted = await transcribe({ response_format: 'verbose_json', prompt: 'Parley, whisper and pocketsphinx.' });
  assert.notDeepEqual(prompted.segments.map((s) => s.tokens), plain.segments.map((s) => s.tokens));
  const de = await transcribe({ response_format: 'verbose_json', language: 'de' });
  assert.equal(de.language, 'german');
  await assert.rejects(transcribe({ language: 'xx' }), (e) => e instanceof BadRequestError && e.param === 'language'
    && /'xx' is not a language/.test(e.message));
  await assert.rejects(transcribe({ language: 'de', model: 'whisper-nano.en' }),
    (e) => e instanceof BadRequestError && e.param === 'language' && /English-only/.test(e.message));
});

test('translations run the translate task on the multilingual model; 501 on the English-only one', async (t) => {
  if (skip) return t.skip(skip);
  const file = await toFile(clip, 'a.wav');
  const v = await client.audio.translations.create({ file, model: 'whisper-1', response_format: 'verbose_json',
    temperature: T });
  assert.equal(v.task, 'translate');
  assert.equal(v.language, 'english');
  checkSegments(v, v.duration);
  const tr = await transcribe({ response_format: 'verbose_json' });
  // a random model may sample the same tokens either way; the task token
  // still changes every probability after it, so the log-probabilities differ
  assert.notDeepEqual(v.segments.map((s) => [s.tokens, s.avg_logprob]), tr.segments.map((s) => [s.tokens, s.avg_logprob]),
    'the task token changed nothing');
  const txt = await client.audio.translations.create({ file: await toFile(clip, 'a.wav'), model: 'whisper-1',
    response_format: 'text', temperature: T });
  assert.equal(txt, `${v.text}\n`);
  await assert.rejects(client.audio.translations.create({ file: await toFile(clip, 'a.wav'), model: 'whisper-nano.en' }),
    (e) => e instanceof APIError && e.status === 501 && e.code === 'not_implemented_local'
      && /whisper-nano\.en does not translate/.test(e.message));
});

test('audio longer than a window: windows follow each other by seeking', async (t) => {
  if (skip) return t.skip(skip);
  const v = await transcribe({ response_format: 'verbose_json' }, long);
  assert.ok(v.duration > 60);
  checkSegments(v, v.duration);
  const seeks = [...new Set(v.segments.map((s) => s.seek))];
  assert.ok(seeks.length >= 2, `one window only: ${seeks}`);
  for (let i = 1; i < seeks.length; i++) assert.ok(seeks[i] > seeks[i - 1] && seeks[i] - seeks[i - 1] <= 3000);
  assert.ok(v.segments.at(-1).end > 30, 'nothing after the first window');
});

test('--stt-beam-size 5: beam search at temperature 0 serves the same shapes; 9 is refused at start', async (t) => {
  if (skip) return t.skip(skip);
  const beam = await startServer({ args: ['--models-dir', dir, '--stt-beam-size', '5'] });
  try {
    const bc = new OpenAI({ baseURL: `${beam.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
    const v = await bc.audio.transcriptions.create({ file: await toFile(clip, 'a.wav'), model: 'whisper-1',
      response_format: 'verbose_json', temperature: 0 });
    assert.ok(v.segments.length >= 1 && v.duration > 0);
    for (const s of v.segments) assert.ok(s.tokens.length >= 1 && s.avg_logprob <= 0 && s.start <= s.end && s.end <= v.duration + 1e-9);
  } finally {
    assert.equal(await beam.stop(), 0);
  }
  const bad = await runCli(['serve', '--port', '0', '--data-dir', path.join(dir, 'data-beam'), '--stt-beam-size', '9']);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /stt-beam-size/);
});

test('pocketsphinx by name beside a Whisper default', async (t) => {
  if (skip) return t.skip(skip);
  const v = await transcribe({ model: 'pocketsphinx-en-us', response_format: 'verbose_json' });
  assert.match(v.text.toLowerCase(), /forward/);
  assert.equal(v.segments[0].seek, 0);
});

test('damaged model files stop the server with the file and the reason', async (t) => {
  if (skip) return t.skip(skip);
  const good = readFileSync(path.join(dir, 'ggml-nano.en.bin'));
  const cases = [
    ['truncated', good.subarray(0, good.length - 1000), /truncated|past the end/i],
    ['mel', (() => { const b = Buffer.from(good); b.writeInt32LE(200, 52); return b; })(), /mel filter/i],
    ['vocab', (() => { const b = Buffer.from(good); b.writeInt32LE(60000, 56 + 80 * 201 * 4); return b; })(), /vocabulary|tokens/i],
    ['magic', Buffer.from('not a model at all'), /ggml|magic|not a whisper/i],
  ];
  for (const [name, bytes, why] of cases) {
    const f = path.join(dir, `bad-${name}.bin`);
    writeFileSync(f, bytes);
    const r = await runCli(['serve', '--port', '0', '--data-dir', path.join(dir, `data-${name}`), '--stt-model', f]);
    rmSync(f);
    assert.notEqual(r.code, 0, `${name}: the server started`);
    assert.ok(r.stderr.includes(f) && why.test(r.stderr), `${name}: ${r.stderr}`);
  }
  const missing = await runCli(['serve', '--port', '0', '--data-dir', path.join(dir, 'data-x'), '--stt-model', '/nonexistent/ggml-x.bin']);
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /--stt-model \/nonexistent\/ggml-x\.bin: no such file/);
});
