// audio.test.mjs - OpenAI audio endpoints through the official `openai` SDK
// against the real binary (../shared/specs/openai.md section 6, checks
// 33-39): speech in every response format (container magic bytes, duration
// decoded back), speed, SSE speech, transcription of synthesized speech in
// every response_format, streamed transcription, bad input.
//
// The round trip uses the local voice behind `echo` (flite rms), which
// pocketsphinx reads best (docs/speech.md); only a robust key word of the
// sentence is asserted, never the exact transcript.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI, { toFile, BadRequestError, APIError } from 'openai';
import { startServer, parseSSE } from '../lib/server.mjs';

const SENTENCE = 'Go forward ten meters.';
let srv, client, tmp, wav, skip = null;

before(async () => {
  srv = await startServer();
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
  tmp = mkdtempSync(path.join(tmpdir(), 'parley-audio-'));
  const probe = await fetch(`${srv.url}/v1/audio/voices`);
  if (probe.status === 404) { skip = 'this binary has no /v1/audio routes'; return; }
  if (probe.status === 503) { skip = `speech engines unavailable: ${await probe.text()}`; return; }
  wav = await speech({ response_format: 'wav', voice: 'echo' });
});
after(async () => {
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

async function speech(extra = {}) {
  const res = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: SENTENCE, ...extra });
  return Buffer.from(await res.arrayBuffer());
}

// Fields of a 16-bit PCM WAV header (the writer's 44-byte layout).
function wavInfo(b) {
  assert.equal(b.toString('latin1', 0, 4), 'RIFF');
  assert.equal(b.toString('latin1', 8, 12), 'WAVE');
  const rate = b.readUInt32LE(24), channels = b.readUInt16LE(22), bits = b.readUInt16LE(34);
  return { rate, channels, bits, seconds: (b.length - 44) / (rate * channels * bits / 8) };
}

// The server's own decoder reads the bytes back (FFmpeg, independent of the
// encoder path): returns verbose_json.
async function decodeBack(bytes, name) {
  return client.audio.transcriptions.create({
    file: await toFile(bytes, name), model: 'whisper-1', response_format: 'verbose_json',
  });
}

test('speech wav: RIFF/WAVE, 24 kHz mono 16-bit, a plausible length for one sentence', async (t) => {
  if (skip) return t.skip(skip);
  const i = wavInfo(wav);
  assert.deepEqual([i.rate, i.channels, i.bits], [24000, 1, 16]);
  assert.ok(i.seconds > 0.8 && i.seconds < 5, `duration ${i.seconds}`);
  // The response is streamed while synthesizing, so the RIFF and data sizes
  // are the streaming placeholder 0xFFFFFFFF (as streamed WAVs carry) or exact.
  const riff = wav.readUInt32LE(4), data = wav.readUInt32LE(40);
  assert.ok(riff === 0xffffffff || riff === wav.length - 8, `RIFF size ${riff}`);
  assert.ok(data === 0xffffffff || data === wav.length - 44, `data size ${data}`);
  // with the sizes filled in, sox reads it as a real file
  const fixed = Buffer.from(wav);
  fixed.writeUInt32LE(wav.length - 8, 4);
  fixed.writeUInt32LE(wav.length - 44, 40);
  const p = path.join(tmp, 'a.wav');
  writeFileSync(p, fixed);
  const soxSeconds = Number(execFileSync('sox', ['--i', '-D', p]).toString().trim());
  assert.ok(Math.abs(soxSeconds - i.seconds) < 0.05, `sox ${soxSeconds} vs header ${i.seconds}`);
});

const MAGIC = {
  mp3: (b) => b.toString('latin1', 0, 3) === 'ID3' || (b[0] === 0xff && (b[1] & 0xe0) === 0xe0),
  opus: (b) => b.toString('latin1', 0, 4) === 'OggS' && b.includes(Buffer.from('OpusHead')),
  aac: (b) => b[0] === 0xff && (b[1] & 0xf6) === 0xf0,
  flac: (b) => b.toString('latin1', 0, 4) === 'fLaC',
};
for (const fmt of Object.keys(MAGIC)) {
  test(`speech ${fmt}: the right container and the same duration as the wav once decoded`, async (t) => {
    if (skip) return t.skip(skip);
    const res = await client.audio.speech.create({ model: 'tts-1', voice: 'echo', input: SENTENCE, response_format: fmt })
      .asResponse();
    const b = Buffer.from(await res.arrayBuffer());
    assert.ok(b.length > 200, `${fmt}: only ${b.length} bytes`);
    assert.ok(MAGIC[fmt](b), `${fmt}: magic bytes ${b.subarray(0, 8).toString('hex')}`);
    assert.match(res.headers.get('content-type'), /^audio\//);
    const back = await decodeBack(b, `x.${fmt === 'opus' ? 'ogg' : fmt}`);
    const want = wavInfo(wav).seconds;
    assert.ok(Math.abs(back.duration - want) < 0.15 * want + 0.1, `${fmt}: decoded ${back.duration} s, wav ${want} s`);
  });
}

test('speech flac: sox decodes it to the same duration', async (t) => {
  if (skip) return t.skip(skip);
  const p = path.join(tmp, 'a.flac'), out = path.join(tmp, 'from-flac.wav');
  writeFileSync(p, await speech({ voice: 'echo', response_format: 'flac' }));
  execFileSync('sox', [p, out]);
  const secs = Number(execFileSync('sox', ['--i', '-D', out]).toString().trim());
  assert.ok(Math.abs(secs - wavInfo(wav).seconds) < 0.1, `flac ${secs}`);
});

test('speech pcm: raw 24 kHz s16le, no header, same length as the wav data', async (t) => {
  if (skip) return t.skip(skip);
  const b = await speech({ voice: 'echo', response_format: 'pcm' });
  assert.equal(b.length % 2, 0);
  assert.notEqual(b.toString('latin1', 0, 4), 'RIFF');
  const secs = b.length / 48000;
  assert.ok(Math.abs(secs - wavInfo(wav).seconds) < 0.05, `pcm ${secs} s`);
});

test('speech speed 0.5 lasts longer than speed 2.0', async (t) => {
  if (skip) return t.skip(skip);
  const slow = wavInfo(await speech({ voice: 'echo', response_format: 'wav', speed: 0.5 })).seconds;
  const fast = wavInfo(await speech({ voice: 'echo', response_format: 'wav', speed: 2.0 })).seconds;
  assert.ok(slow > fast * 2, `slow ${slow} s, fast ${fast} s`);
});

test('speech stream_format sse: speech.audio.delta chunks that join into the audio, then done with usage', async (t) => {
  if (skip) return t.skip(skip);
  const res = await client.audio.speech.create({
    model: 'tts-1', voice: 'echo', input: SENTENCE, response_format: 'wav', stream_format: 'sse',
  }).asResponse();
  assert.match(res.headers.get('content-type'), /text\/event-stream/);
  const { events } = parseSSE(await res.text());
  const data = events.map((e) => JSON.parse(e.data));
  const deltas = data.filter((d) => d.type === 'speech.audio.delta');
  assert.ok(deltas.length >= 1);
  const last = data[data.length - 1];
  assert.equal(last.type, 'speech.audio.done');
  assert.ok(last.usage.input_tokens > 0 && last.usage.total_tokens === last.usage.input_tokens + last.usage.output_tokens);
  const audio = Buffer.concat(deltas.map((d) => Buffer.from(d.audio, 'base64')));
  assert.equal(audio.toString('latin1', 0, 4), 'RIFF');
  // streamed WAV carries unknown sizes; the samples equal the whole file's
  assert.ok(Math.abs((audio.length - 44) - (wav.length - 44)) < 4, `sse ${audio.length} vs ${wav.length}`);
});

test('speech: voices as {id}, local names and vendor names all speak', async (t) => {
  if (skip) return t.skip(skip);
  for (const voice of [{ id: 'slt' }, 'espeak:en-us', 'coral', 'ash']) {
    const b = await speech({ voice, response_format: 'wav' });
    assert.ok(wavInfo(b).seconds > 0.5, `voice ${JSON.stringify(voice)}`);
  }
});

test('speech bad input: unknown voice, empty input, bad format and speed are 400 naming the field', async (t) => {
  if (skip) return t.skip(skip);
  const cases = [
    [{ voice: 'no-such-voice' }, 'voice'],
    [{ input: '' }, 'input'],
    [{ input: 'x'.repeat(4097) }, 'input'],
    [{ response_format: 'ogg-vorbis' }, 'response_format'],
    [{ speed: 9 }, 'speed'],
    [{ stream_format: 'chunks' }, 'stream_format'],
  ];
  for (const [extra, param] of cases) {
    await assert.rejects(speech(extra), (e) => {
      assert.ok(e instanceof BadRequestError, `${param}: ${e}`);
      assert.equal(e.param, param);
      assert.match(e.message, new RegExp(param));
      return true;
    });
  }
});

test('transcription json of synthesized speech: the key words come back, with usage', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1' });
  assert.equal(typeof r.text, 'string');
  assert.match(r.text.toLowerCase(), /forward/);
  assert.equal(r.usage.type, 'duration');
  assert.ok(r.usage.seconds >= 1);
});

test('transcription text: a plain string, not JSON-quoted', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1', response_format: 'text' });
  assert.equal(typeof r, 'string');
  assert.ok(!r.startsWith('"') && !r.startsWith('{'));
  assert.match(r.toLowerCase(), /forward/);
});

test('transcription srt and vtt: numbered cues / WEBVTT header with well-formed times', async (t) => {
  if (skip) return t.skip(skip);
  const srt = await client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1', response_format: 'srt' });
  assert.match(srt, /^1\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\n\S.*\n\n/);
  const vtt = await client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1', response_format: 'vtt' });
  assert.match(vtt, /^WEBVTT\n\n\d\d:\d\d:\d\d\.\d\d\d --> \d\d:\d\d:\d\d\.\d\d\d\n\S.*\n\n/);
});

test('transcription verbose_json with word and segment granularities', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.audio.transcriptions.create({
    file: await toFile(wav, 'a.wav'), model: 'whisper-1', response_format: 'verbose_json',
    timestamp_granularities: ['word', 'segment'],
  });
  assert.equal(r.task, 'transcribe');
  assert.equal(r.language, 'english');
  assert.ok(Math.abs(r.duration - wavInfo(wav).seconds) < 0.05);
  assert.ok(r.words.length >= 2);
  let prev = 0;
  for (const w of r.words) {
    assert.equal(typeof w.word, 'string');
    assert.ok(w.start >= prev - 1e-9 && w.end > w.start && w.end <= r.duration + 0.05, JSON.stringify(w));
    prev = w.start;
  }
  assert.ok(r.segments.length >= 1);
  for (const s of r.segments) {
    for (const k of ['id', 'seek', 'start', 'end', 'text', 'tokens', 'temperature', 'avg_logprob', 'compression_ratio', 'no_speech_prob'])
      assert.ok(k in s, `segment lacks ${k}`);
    assert.ok(s.avg_logprob <= 0);
  }
  assert.equal(r.segments.map((s) => s.text).join(' '), r.text);
});

test('transcription stream: deltas concatenate to the done text; include logprobs', async (t) => {
  if (skip) return t.skip(skip);
  const stream = await client.audio.transcriptions.create({
    file: await toFile(wav, 'a.wav'), model: 'gpt-4o-transcribe', stream: true, include: ['logprobs'],
  });
  let joined = '', done = null, n = 0;
  for await (const ev of stream) {
    if (ev.type === 'transcript.text.delta') {
      joined += ev.delta;
      n++;
      assert.ok(Array.isArray(ev.logprobs) && ev.logprobs[0].logprob <= 0);
    } else if (ev.type === 'transcript.text.done') done = ev;
  }
  assert.ok(n >= 2, `${n} deltas`);
  assert.ok(done, 'no transcript.text.done');
  assert.equal(done.text, joined);
  assert.ok(Array.isArray(done.logprobs) && done.logprobs.length === n);
  assert.match(done.text.toLowerCase(), /forward/);
  // TranscriptTextDoneEvent.usage admits token usage only; the local
  // recognizers count seconds, so the event carries none.
  assert.ok(!('usage' in done) || done.usage.type === 'tokens', JSON.stringify(done.usage));
});

test('transcription accepts mp3, ogg and flac uploads (format detected from the bytes)', async (t) => {
  if (skip) return t.skip(skip);
  for (const [fmt, name] of [['mp3', 'speech.bin'], ['opus', 'a.ogg'], ['flac', 'noext']]) {
    const b = await speech({ voice: 'echo', response_format: fmt });
    const r = await client.audio.transcriptions.create({ file: await toFile(b, name), model: 'whisper-1' });
    assert.match(r.text.toLowerCase(), /forward|ten|meters/, `${fmt}: '${r.text}'`);
  }
});

test('transcription bad input: a non-audio file, an empty file, a missing model, French are 400', async (t) => {
  if (skip) return t.skip(skip);
  const junk = Buffer.from('this is a text file, not audio at all\n'.repeat(40));
  await assert.rejects(client.audio.transcriptions.create({ file: await toFile(junk, 'notes.txt'), model: 'whisper-1' }),
    (e) => e instanceof BadRequestError && e.param === 'file' && /decode/.test(e.message));
  await assert.rejects(client.audio.transcriptions.create({ file: await toFile(Buffer.alloc(0), 'a.wav'), model: 'whisper-1' }),
    (e) => e instanceof BadRequestError && /empty/.test(e.message));
  await assert.rejects(client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav') }),
    (e) => e instanceof BadRequestError && e.param === 'model');
  await assert.rejects(client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1', language: 'fr' }),
    (e) => e instanceof BadRequestError && e.param === 'language');
  await assert.rejects(client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1', response_format: 'xml' }),
    (e) => e instanceof BadRequestError && e.param === 'response_format');
  // half a WAV still decodes what it holds; a header alone is refused
  await assert.rejects(client.audio.transcriptions.create({ file: await toFile(wav.subarray(0, 44), 'a.wav'), model: 'whisper-1' }),
    (e) => e instanceof BadRequestError);
});

test('translations: the 501 not_implemented_local of every unimplemented operation, no retry', async (t) => {
  if (skip) return t.skip(skip);
  await assert.rejects(client.audio.translations.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1' }), (e) => {
    assert.ok(e instanceof APIError);
    assert.equal(e.status, 501);
    assert.equal(e.code, 'not_implemented_local');
    assert.equal(e.type, 'server_error');
    assert.equal(e.param, null);
    assert.match(e.message, /createTranslation \(POST \/v1\/audio\/translations\) needs a multilingual Whisper model.*pocketsphinx-en-us does not translate/);
    assert.equal(e.headers.get('x-should-retry'), 'false');
    return true;
  });
});

test('GET /v1/audio/voices lists the local voices and the OpenAI names', async (t) => {
  if (skip) return t.skip(skip);
  const v = await client.get('/audio/voices');
  assert.equal(v.object, 'list');
  const ids = v.data.map((x) => x.id);
  for (const id of ['slt', 'rms', 'alloy', 'echo', 'aura-2-thalia-en']) assert.ok(ids.includes(id), `missing ${id}`);
  assert.ok(ids.some((id) => id.startsWith('espeak:')));
  const alloy = v.data.find((x) => x.id === 'alloy');
  assert.equal(alloy.local_voice, 'slt');
  for (const x of v.data) assert.ok(x.sample_rate > 0 && typeof x.language === 'string');
});

test('a long transcription does not hold the HTTP thread: /health answers meanwhile (one HTTP thread)', async (t) => {
  if (skip) return t.skip(skip);
  const one = await startServer({ args: ['--http-threads', '1'] });
  try {
    const c1 = new OpenAI({ baseURL: `${one.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
    // 12 copies of the sentence: tens of seconds of audio, seconds of decoding
    const pcm = wav.subarray(44);
    const data = Buffer.concat(Array.from({ length: 12 }, () => pcm));
    const long = Buffer.concat([wav.subarray(0, 44), data]);
    long.writeUInt32LE(36 + data.length, 4);
    long.writeUInt32LE(data.length, 40);
    let finished = 0;
    const job = c1.audio.transcriptions.create({ file: await toFile(long, 'long.wav'), model: 'whisper-1' })
      .then((r) => { finished = Date.now(); return r; });
    await new Promise((r) => setTimeout(r, 300)); // the upload is in and decoding has begun
    const t0 = Date.now();
    const h = await fetch(`${one.url}/health`);
    const answered = Date.now();
    assert.equal(h.status, 200);
    const r = await job;
    assert.match(r.text.toLowerCase(), /forward/);
    assert.ok(finished === 0 || answered <= finished, 'health waited for the transcription');
    // the handler itself still decodes the upload (fast), so allow for a
    // loaded or sanitizer build; the point is the order above
    assert.ok(answered - t0 < 5000, `health took ${answered - t0} ms`);
  } finally {
    await one.stop();
  }
});

test('transcription: a file part sent without a file name is still read as audio', async (t) => {
  if (skip) return t.skip(skip);
  const b = 'XyZbound';
  const body = Buffer.concat([
    Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n`),
    Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="file"\r\nContent-Type: audio/wav\r\n\r\n`),
    wav, Buffer.from(`\r\n--${b}--\r\n`),
  ]);
  const res = await fetch(`${srv.url}/v1/audio/transcriptions`, {
    method: 'POST', body, headers: { 'Content-Type': `multipart/form-data; boundary=${b}`, Authorization: 'Bearer x' },
  });
  assert.equal(res.status, 200);
  assert.match((await res.json()).text.toLowerCase(), /forward/);
});
