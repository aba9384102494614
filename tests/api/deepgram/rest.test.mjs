// rest.test.mjs - Deepgram REST endpoints through the official @deepgram/sdk
// (5.13.0) against the real binary (../shared/specs/deepgram.md sections 3,
// 5, 8 and the conformance checks of section 11 that apply to REST):
// pre-recorded transcription of synthesized speech with every option we
// honour or report, /speak in every encoding with the headers the SDKs read,
// the models list, errors in the Deepgram shape, path aliases, /read without a model.
//
// Speech comes from the server itself (/speak with aura-orion-en, the local
// flite rms voice, which pocketsphinx reads best); only robust key words of
// the sentence are asserted, never the exact transcript.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { DeepgramClient, DeepgramError, Deepgram } from '@deepgram/sdk';
import { startServer } from '../lib/server.mjs';

const SENTENCE = 'Go forward ten meters. Then turn left and stop.';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
let srv, dg, base, wav, pcm, skip = null;

before(async () => {
  srv = await startServer({ args: ['--access-log'] });
  base = `${srv.url}/deepgram`;
  dg = new DeepgramClient({ apiKey: 'k', baseUrl: base });
  const probe = await fetch(`${base}/v1/models`);
  if (probe.status === 404) { skip = 'this binary has no Deepgram routes'; return; }
  wav = await speakBytes({ model: 'aura-orion-en', encoding: 'linear16', sample_rate: 16000 });
  pcm = await speakBytes({ model: 'aura-orion-en', encoding: 'linear16', sample_rate: 16000, container: 'none' });
});
after(async () => {
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
});

async function speakBytes(opts, text = SENTENCE) {
  const res = await dg.speak.v1.audio.generate({ text, ...opts });
  return Buffer.from(await res.arrayBuffer());
}

function transcribe(bytes, opts = {}) {
  return dg.listen.v1.media.transcribeFile(bytes, { model: 'nova-3', ...opts });
}

// POST with fetch when the SDK cannot express the request.
async function post(path, body, headers = {}, query = '') {
  const res = await fetch(`${srv.url}${path}${query}`, { method: 'POST', body, headers: { Authorization: 'Token k', ...headers } });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

function assertDeepgramError(body, status) {
  assert.equal(typeof body.err_code, 'string', JSON.stringify(body));
  assert.equal(typeof body.err_msg, 'string');
  assert.match(body.request_id, UUID);
  if (status === 400) assert.equal(body.err_code, 'Bad Request');
}

const words = (r) => r.results.channels[0].alternatives[0].transcript.toLowerCase();

test('speak default: mp3 with dg-* headers, chunked, Date, char count', async (t) => {
  if (skip) return t.skip(skip);
  const { data, rawResponse } = await dg.speak.v1.audio.generate({ text: 'Hello world.', model: 'aura-2-thalia-en' })
    .withRawResponse();
  const b = Buffer.from(await data.arrayBuffer());
  assert.ok(b.length > 500);
  assert.ok(b.toString('latin1', 0, 3) === 'ID3' || (b[0] === 0xff && (b[1] & 0xe0) === 0xe0));
  const h = rawResponse.headers;
  assert.equal(h.get('content-type'), 'audio/mpeg');
  assert.match(h.get('dg-request-id'), UUID);
  assert.equal(h.get('dg-model-name'), 'aura-2-thalia-en');
  assert.match(h.get('dg-model-uuid'), UUID);
  assert.equal(h.get('dg-char-count'), '12');
  assert.equal(h.get('transfer-encoding'), 'chunked');
  assert.ok(h.get('date'));
  // the model uuid is the one /models reports
  const models = await dg.manage.v1.models.list();
  assert.equal(models.tts.find((m) => m.name === 'aura-2-thalia-en').uuid, h.get('dg-model-uuid'));
});

test('speak linear16: wav at the asked rate; container=none has no header', async (t) => {
  if (skip) return t.skip(skip);
  const b = await speakBytes({ model: 'aura-asteria-en', encoding: 'linear16', container: 'wav', sample_rate: 24000 });
  assert.equal(b.toString('latin1', 0, 4), 'RIFF');
  assert.equal(b.toString('latin1', 8, 12), 'WAVE');
  assert.equal(b.readUInt32LE(24), 24000);
  assert.equal(wav.readUInt32LE(24), 16000);
  assert.notEqual(pcm.toString('latin1', 0, 4), 'RIFF');
  assert.equal(pcm.length % 2, 0);
  assert.ok(Math.abs(pcm.length - (wav.length - 44)) <= 2, `pcm ${pcm.length}, wav data ${wav.length - 44}`);
});

test('speak every encoding: the right container or raw bytes', async (t) => {
  if (skip) return t.skip(skip);
  const cases = [
    [{ encoding: 'mulaw' }, (b) => b.toString('latin1', 0, 4) === 'RIFF' && b.readUInt16LE(20) === 7 && b.readUInt32LE(24) === 8000],
    [{ encoding: 'alaw', sample_rate: 16000 }, (b) => b.toString('latin1', 0, 4) === 'RIFF' && b.readUInt16LE(20) === 6 && b.readUInt32LE(24) === 16000],
    [{ encoding: 'mulaw', container: 'none' }, (b) => b.toString('latin1', 0, 4) !== 'RIFF'],
    [{ encoding: 'opus' }, (b) => b.toString('latin1', 0, 4) === 'OggS'],
    [{ encoding: 'flac' }, (b) => b.toString('latin1', 0, 4) === 'fLaC'],
    [{ encoding: 'aac' }, (b) => b[0] === 0xff && (b[1] & 0xf6) === 0xf0],
    [{ encoding: 'mp3', bit_rate: 32000 }, (b) => b.toString('latin1', 0, 3) === 'ID3' || b[0] === 0xff],
  ];
  for (const [opts, check] of cases) {
    const b = await speakBytes({ model: 'aura-asteria-en', ...opts }, 'Testing one two three.');
    assert.ok(b.length > 200 && check(b), `${JSON.stringify(opts)}: ${b.subarray(0, 24).toString('hex')}`);
  }
  // raw mu-law at 8 kHz: one byte per sample, so about a second of audio is ~8000 bytes
  const mu = await speakBytes({ model: 'aura-asteria-en', encoding: 'mulaw', container: 'none' }, 'Testing one two three.');
  assert.ok(mu.length > 4000 && mu.length < 40000, `${mu.length}`);
});

test('speak errors: 400 in the Deepgram shape, thrown as BadRequestError', async (t) => {
  if (skip) return t.skip(skip);
  const cases = [
    [{ text: '' }, /text/],
    [{ text: 'hi', model: 'no-such-voice' }, /model/],
    [{ text: 'hi', encoding: 'wma' }, /encoding/],
    [{ text: 'hi', encoding: 'linear16', sample_rate: 11025 }, /sample_rate/],
    [{ text: 'hi', encoding: 'mp3', sample_rate: 48000 }, /sample_rate/],
    [{ text: 'hi', encoding: 'linear16', bit_rate: 32000 }, /bit_rate/],
    [{ text: 'hi', encoding: 'opus', container: 'none' }, /container/],
  ];
  for (const [req, re] of cases) {
    await assert.rejects(dg.speak.v1.audio.generate({ model: 'aura-asteria-en', ...req }), (e) => {
      assert.ok(e instanceof Deepgram.BadRequestError, `${JSON.stringify(req)}: ${e}`);
      assert.equal(e.statusCode, 400);
      assertDeepgramError(e.body, 400);
      assert.match(e.body.err_msg, re);
      return true;
    });
  }
  const r = await post('/deepgram/v1/speak', '{}', { 'Content-Type': 'application/json' });
  assert.equal(r.status, 400);
  assertDeepgramError(r.json, 400);
});

test('listen transcribeFile: transcript, words, metadata consistent with headers and /models', async (t) => {
  if (skip) return t.skip(skip);
  const { data: r, rawResponse } = await transcribe(wav).withRawResponse();
  assert.match(words(r), /forward/);
  assert.match(words(r), /stop|turn/);
  const m = r.metadata;
  assert.equal(m.transaction_key, 'deprecated');
  assert.match(m.request_id, UUID);
  assert.equal(m.request_id, rawResponse.headers.get('dg-request-id'));
  assert.ok(!Number.isNaN(Date.parse(m.created)) && m.created.endsWith('Z'));
  assert.equal(m.sha256, createHash('sha256').update(wav).digest('hex'));
  assert.ok(Math.abs(m.duration - (wav.length - 44) / 32000) < 0.01, `${m.duration}`);
  assert.equal(m.channels, 1);
  assert.ok(m.models.length >= 1);
  for (const u of m.models) for (const k of ['name', 'version', 'arch']) assert.equal(typeof m.model_info[u][k], 'string');
  const models = await dg.manage.v1.models.list();
  assert.equal(models.stt[0].uuid, m.models[0]);
  const alt = r.results.channels[0].alternatives[0];
  assert.ok(alt.confidence > 0 && alt.confidence <= 1);
  let prev = 0;
  for (const w of alt.words) {
    assert.equal(typeof w.word, 'string');
    assert.ok(w.start >= prev && w.end > w.start && w.end <= m.duration + 0.01);
    assert.ok(w.confidence >= 0 && w.confidence <= 1);
    assert.equal(w.punctuated_word, undefined);
    prev = w.start;
  }
});

test('listen media type matrix: wav, octet-stream, deepgram/audio+video and none give the same transcript', async (t) => {
  if (skip) return t.skip(skip);
  const seen = [];
  for (const ct of ['audio/wav', 'application/octet-stream', 'deepgram/audio+video', null]) {
    const headers = ct ? { 'Content-Type': ct } : {};
    // fetch would add text/plain to a string body; a Uint8Array gets no type
    const r = await post('/deepgram/v1/listen', new Uint8Array(wav), headers, '?model=nova-3');
    assert.equal(r.status, 200, `${ct}: ${r.text}`);
    seen.push(r.json.results.channels[0].alternatives[0].transcript);
  }
  assert.ok(seen[0].length > 0);
  for (const s of seen) assert.equal(s, seen[0]);
});

test('listen chunked upload (a stream of unknown length) gives the same transcript as the one-shot upload', async (t) => {
  if (skip) return t.skip(skip);
  const { Readable } = await import('node:stream');
  const one = await transcribe(wav);
  const parts = [];
  for (let i = 0; i < wav.length; i += 7000) parts.push(wav.subarray(i, i + 7000));
  const r = await dg.listen.v1.media.transcribeFile(Readable.from(parts), { model: 'nova-3' });
  assert.equal(r.results.channels[0].alternatives[0].transcript, one.results.channels[0].alternatives[0].transcript);
  assert.equal(r.metadata.sha256, one.metadata.sha256);
});

test('listen punctuate and smart_format: punctuated_word, capitalised transcript', async (t) => {
  if (skip) return t.skip(skip);
  for (const opt of [{ punctuate: true }, { smart_format: true }]) {
    const r = await transcribe(wav, opt);
    const alt = r.results.channels[0].alternatives[0];
    assert.ok(alt.words.every((w) => typeof w.punctuated_word === 'string'));
    assert.match(alt.transcript, /^[A-Z]/);
    assert.match(alt.transcript, /\.$/);
  }
});

test('listen utterances + diarize: utterance shape, integer speakers, a warning about diarization', async (t) => {
  if (skip) return t.skip(skip);
  const r = await transcribe(wav, { utterances: true, diarize: true });
  assert.ok(r.results.utterances.length >= 1);
  for (const u of r.results.utterances) {
    for (const k of ['start', 'end', 'confidence', 'channel', 'transcript', 'words', 'speaker', 'id']) assert.ok(k in u, k);
    assert.match(u.id, UUID);
    assert.ok(u.end > u.start);
    assert.ok(u.words.every((w) => Number.isInteger(w.speaker)));
  }
  assert.ok(r.results.channels[0].alternatives[0].words.every((w) => Number.isInteger(w.speaker)));
  assert.ok(r.metadata.warnings.some((w) => w.parameter === 'diarize'));
  // utt_split shorter than the pause between the two sentences splits them
  const split = await transcribe(wav, { utterances: true, utt_split: 0.2 });
  assert.ok(split.results.utterances.length >= 2, JSON.stringify(split.results.utterances.map((u) => u.transcript)));
});

test('listen paragraphs: transcript string, sentences with times, num_words', async (t) => {
  if (skip) return t.skip(skip);
  const r = await transcribe(wav, { paragraphs: true });
  const p = r.results.channels[0].alternatives[0].paragraphs;
  assert.equal(typeof p.transcript, 'string');
  assert.ok(p.transcript.startsWith('\n'));
  let total = 0;
  for (const para of p.paragraphs) {
    assert.ok(para.sentences.length >= 1 && para.end >= para.start);
    for (const s of para.sentences) assert.ok(typeof s.text === 'string' && s.end > s.start);
    total += para.num_words;
  }
  assert.equal(total, r.results.channels[0].alternatives[0].words.length);
});

test('listen search, replace, tag, extra; unsupported options are warnings, not errors', async (t) => {
  if (skip) return t.skip(skip);
  const r = await transcribe(wav, {
    search: ['ten', 'purple elephant'], replace: ['forward:ahead'], tag: ['t1', 't2'], extra: ['k:v'],
    summarize: 'v2', topics: true, intents: true, sentiment: true, keyterm: ['alpha', 'beta'], profanity_filter: true,
    mip_opt_out: true,
  });
  const ch = r.results.channels[0];
  const s = ch.search.find((x) => x.query === 'ten');
  assert.equal(s.hits.length, 1);
  assert.ok(s.hits[0].end > s.hits[0].start);
  assert.equal(ch.search.find((x) => x.query === 'purple elephant').hits.length, 0);
  assert.match(words(r), /ahead/);
  assert.doesNotMatch(words(r), /forward/);
  assert.deepEqual(r.metadata.tags, ['t1', 't2']);
  assert.deepEqual(r.metadata.extra, { k: 'v' });
  const warned = r.metadata.warnings.map((w) => w.parameter);
  for (const p of ['summarize', 'topics', 'intents', 'sentiment', 'keyterm', 'profanity_filter']) assert.ok(warned.includes(p), `no warning for ${p}`);
  for (const w of r.metadata.warnings) assert.ok(w.type && w.message);
  // no language model on this server: the intelligence features say how to get one
  assert.match(r.metadata.warnings.find((w) => w.parameter === 'topics').message, /--default-model/);
  for (const k of ['summary', 'topics', 'intents', 'sentiments']) assert.equal(r.results[k], undefined, k);
});

test('listen numerals and smart_format: number words become digits, with the run\'s times', async (t) => {
  if (skip) return t.skip(skip);
  const plain = await transcribe(wav);
  const pw = plain.results.channels[0].alternatives[0].words;
  const ten = pw.find((w) => w.word === 'ten');
  if (!ten) return t.skip(`the recognizer did not hear "ten": ${words(plain)}`);
  for (const opt of [{ numerals: true }, { smart_format: true }]) {
    const r = await transcribe(wav, opt);
    const alt = r.results.channels[0].alternatives[0];
    assert.match(alt.transcript, /\b10\b/, JSON.stringify(opt));
    assert.doesNotMatch(alt.transcript, /\bten\b/i);
    const w = alt.words.find((x) => x.word === '10');
    assert.ok(w && Math.abs(w.start - ten.start) < 1e-6 && Math.abs(w.end - ten.end) < 1e-6);
    assert.ok(!(r.metadata.warnings || []).some((x) => x.parameter === 'numerals'));
  }
  // longer numbers come from the words the recognizer hears
  const speech = await speakBytes({ model: 'aura-orion-en', encoding: 'linear16', sample_rate: 16000 }, 'Twenty one. Two hundred five.');
  const n = await transcribe(speech, { numerals: true });
  const text = n.results.channels[0].alternatives[0].transcript;
  const heard = await transcribe(speech);
  const hw = words(heard);
  if (/twenty one/.test(hw)) assert.match(text, /\b21\b/, `${hw} -> ${text}`);
  if (/two hundred five/.test(hw)) assert.match(text, /\b205\b/, `${hw} -> ${text}`);
});

test('listen multichannel: one result per channel, each with its own words', async (t) => {
  if (skip) return t.skip(skip);
  // stereo 16 kHz WAV: speech left, silence right
  const n = pcm.length / 2;
  const data = Buffer.alloc(n * 4);
  for (let i = 0; i < n; i++) data.writeInt16LE(pcm.readInt16LE(2 * i), 4 * i);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0); h.writeUInt32LE(36 + data.length, 4); h.write('WAVE', 8); h.write('fmt ', 12);
  h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(2, 22); h.writeUInt32LE(16000, 24);
  h.writeUInt32LE(64000, 28); h.writeUInt16LE(4, 32); h.writeUInt16LE(16, 34); h.write('data', 36); h.writeUInt32LE(data.length, 40);
  const r = await transcribe(Buffer.concat([h, data]), { multichannel: true });
  assert.equal(r.metadata.channels, 2);
  assert.equal(r.results.channels.length, 2);
  assert.match(r.results.channels[0].alternatives[0].transcript, /forward/);
  assert.ok(r.results.channels[1].alternatives[0].words.length <= 1);
});

test('listen raw linear16 with encoding and sample_rate; missing sample_rate is 400', async (t) => {
  if (skip) return t.skip(skip);
  // the SDK's prerecorded types have no sample_rate: it goes in queryParams
  const r = await dg.listen.v1.media.transcribeFile(pcm, { model: 'nova-3', encoding: 'linear16' },
    { queryParams: { sample_rate: 16000 } });
  assert.match(words(r), /forward/);
  const mu = await post('/deepgram/v1/listen', new Uint8Array(await speakBytes({ model: 'aura-orion-en', encoding: 'mulaw', container: 'none' })),
    {}, '?encoding=mulaw&sample_rate=8000');
  assert.equal(mu.status, 200, mu.text);
  assert.match(mu.json.results.channels[0].alternatives[0].transcript, /forward|ten|meters/);
  const bad = await post('/deepgram/v1/listen', new Uint8Array(pcm), {}, '?encoding=linear16');
  assert.equal(bad.status, 400);
  assert.match(bad.json.err_msg, /sample_rate/);
});

test('listen corrupt media: 400 BadRequestError in the Deepgram shape, sent once', async (t) => {
  if (skip) return t.skip(skip);
  await new Promise((r) => setTimeout(r, 500)); // earlier requests' access-log lines land first
  const before = (srv.log().match(/POST \/deepgram\/v1\/listen/g) || []).length;
  await assert.rejects(transcribe(randomBytes(1024)), (e) => {
    assert.ok(e instanceof Deepgram.BadRequestError, String(e));
    assert.equal(e.statusCode, 400);
    assertDeepgramError(e.body, 400);
    assert.match(e.body.err_msg, /audio/);
    return true;
  });
  // the access-log line can come a moment after the answer
  const count = () => (srv.log().match(/POST \/deepgram\/v1\/listen/g) || []).length;
  for (let i = 0; i < 40 && count() === before; i++) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(count() - before, 1, 'the SDK retried a 400');
});

test('listen bad requests: url body, empty body, French, callback, bad boolean are 400 naming the cause', async (t) => {
  if (skip) return t.skip(skip);
  await assert.rejects(dg.listen.v1.media.transcribeUrl({ url: 'http://127.0.0.1:9/a.wav', model: 'nova-3' }),
    (e) => e instanceof Deepgram.BadRequestError && /url/.test(e.body.err_msg));
  const cases = [
    [new Uint8Array(0), {}, '', /empty/],
    [new Uint8Array(wav), {}, '?language=fr', /language/],
    [new Uint8Array(wav), {}, '?callback=http://127.0.0.1:9/cb', /callback/],
    [new Uint8Array(wav), {}, '?punctuate=maybe', /punctuate/],
    ['{"nourl": 1}', { 'Content-Type': 'application/json' }, '', /url/],
    ['{not json', { 'Content-Type': 'application/json; charset=utf-8' }, '', /JSON/],
  ];
  for (const [body, headers, q, re] of cases) {
    const r = await post('/deepgram/v1/listen', body, headers, q);
    assert.equal(r.status, 400, `${q}: ${r.text}`);
    assertDeepgramError(r.json, 400);
    assert.match(r.json.err_msg, re);
  }
});

test('models list and get: stt and tts shapes, lookup by uuid, unknown id 404', async (t) => {
  if (skip) return t.skip(skip);
  const m = await dg.manage.v1.models.list();
  assert.ok(m.stt.length >= 1 && m.tts.length >= 10);
  for (const x of [...m.stt, ...m.tts]) {
    for (const k of ['name', 'canonical_name', 'architecture', 'languages', 'version', 'uuid']) assert.ok(k in x, k);
    assert.match(x.uuid, UUID);
  }
  for (const k of ['batch', 'streaming', 'formatted_output']) assert.equal(typeof m.stt[0][k], 'boolean');
  assert.deepEqual(await dg.manage.v1.models.get(m.stt[0].uuid), m.stt[0]);
  const thalia = m.tts.find((x) => x.name === 'aura-2-thalia-en');
  assert.deepEqual(await dg.manage.v1.models.get(thalia.uuid), thalia);
  await assert.rejects(dg.manage.v1.models.get('00000000-0000-4000-8000-000000000000'), (e) => {
    assert.ok(e instanceof DeepgramError);
    assert.equal(e.statusCode, 404);
    assertDeepgramError(e.body, 404);
    return true;
  });
});

test('paths: trailing-slash base, /deepgram/vl, root /v1/listen and /v1/speak; /v1/models stays OpenAI', async (t) => {
  if (skip) return t.skip(skip);
  const slash = new DeepgramClient({ apiKey: 'k', baseUrl: `${base}/` });
  const r = await slash.listen.v1.media.transcribeFile(wav, { model: 'nova-3' });
  assert.match(r.results.channels[0].alternatives[0].transcript, /forward/);
  assert.match(srv.log(), /POST \/deepgram\/v1\/listen/);
  for (const p of ['/deepgram/vl/listen', '/v1/listen', '/deepgram//v1/listen']) {
    const x = await post(p, new Uint8Array(wav), { 'Content-Type': 'audio/wav' });
    assert.equal(x.status, 200, `${p}: ${x.text}`);
    assert.match(x.json.results.channels[0].alternatives[0].transcript, /forward/);
  }
  const sp = await post('/v1/speak?encoding=linear16', JSON.stringify({ text: 'Hi.' }), { 'Content-Type': 'application/json' });
  assert.equal(sp.status, 200);
  assert.match(sp.headers.get('dg-model-name'), /aura/);
  const vl = await fetch(`${srv.url}/deepgram/vl/models`);
  assert.equal(vl.status, 200);
  const om = await (await fetch(`${srv.url}/v1/models`)).json();
  assert.equal(om.object, 'list', 'root /v1/models must remain the OpenAI model list');
});

test('an SDK based at the server root: /v1/models answers in Deepgram\'s shape, by its headers', async (t) => {
  if (skip) return t.skip(skip);
  const root = new DeepgramClient({ apiKey: 'k', baseUrl: srv.url });
  const m = await root.manage.v1.models.list();
  assert.ok(Array.isArray(m.stt) && m.stt.length >= 1, JSON.stringify(m).slice(0, 200));
  assert.ok(Array.isArray(m.tts) && m.tts.length >= 10);
  assert.equal(m.object, undefined);
  assert.deepEqual(await root.manage.v1.models.get(m.stt[0].uuid), m.stt[0]);
  const thalia = m.tts.find((x) => x.name === 'aura-2-thalia-en');
  assert.deepEqual(await root.manage.v1.models.get('aura-2-thalia-en'), thalia);
  await assert.rejects(root.manage.v1.models.get('00000000-0000-4000-8000-000000000000'), (e) => {
    assert.ok(e instanceof DeepgramError);
    assert.equal(e.statusCode, 404);
    assertDeepgramError(e.body, 404);
    return true;
  });
  // a key in Deepgram's scheme alone is enough to tell the dialect
  const tok = await (await fetch(`${srv.url}/v1/models`, { headers: { Authorization: 'Token k' } })).json();
  assert.ok(Array.isArray(tok.stt), JSON.stringify(tok).slice(0, 200));
});

test('read without any language model: a Deepgram-shaped 503 naming --default-model', async (t) => {
  if (skip) return t.skip(skip);
  await assert.rejects(dg.read.v1.text.analyze({ body: { text: 'Hello there.' }, language: 'en', summarize: true }), (e) => {
    assert.ok(e instanceof DeepgramError);
    assert.equal(e.statusCode, 503);
    assertDeepgramError(e.body, 503);
    assert.match(e.body.err_msg, /--default-model/);
    return true;
  });
});

test('auth: Token and lower-case bearer accepted, a wrong key is 401 INVALID_AUTH', async (t) => {
  if (skip) return t.skip(skip);
  const keyed = await startServer({ args: ['--api-key', 'secret'] });
  try {
    const good = new DeepgramClient({ apiKey: 'secret', baseUrl: `${keyed.url}/deepgram` });
    assert.ok((await good.manage.v1.models.list()).stt.length >= 1);
    const bearer = await fetch(`${keyed.url}/deepgram/v1/models`, { headers: { Authorization: 'bearer secret' } });
    assert.equal(bearer.status, 200);
    const bad = new DeepgramClient({ apiKey: 'wrong', baseUrl: `${keyed.url}/deepgram` });
    await assert.rejects(bad.listen.v1.media.transcribeFile(wav, { model: 'nova-3' }), (e) => {
      assert.equal(e.statusCode, 401);
      assert.equal(e.body.err_code, 'INVALID_AUTH');
      assertDeepgramError(e.body, 401);
      return true;
    });
  } finally {
    await keyed.stop();
  }
});
