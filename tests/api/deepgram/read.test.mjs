// read.test.mjs - Deepgram text intelligence (POST /v1/read, spec section 7)
// through the official @deepgram/sdk against a generated random-weight
// model: the flat response shape, every feature's result and *_info, strict
// custom topics/intents staying within the given labels (the schema enum),
// short texts summarised as themselves, and the errors. The model's words are
// gibberish: shapes, ranges and invariants are asserted, not meaning.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DeepgramClient, DeepgramError } from '@deepgram/sdk';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const LONG = Array.from({ length: 12 }, (_, i) =>
  `Sentence ${i} says that the order arrived late and the customer would like a refund soon.`).join(' ');
let srv, dg, models, skip;

before(async () => {
  models = await makeModelsDir();
  if (models.skip) { skip = models.skip; return; }
  srv = await startServer({ args: ['--models-dir', models.dir, '--default-model', 'org/tiny'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  dg = new DeepgramClient({ apiKey: 'k', baseUrl: `${srv.url}/deepgram` });
});
after(async () => {
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
  if (models?.cleanup) models.cleanup();
});

const words = (s) => s.trim().split(/\s+/).length;

test('summarize, topics, intents and sentiment in the flat shape with their *_info', async (t) => {
  if (skip) return t.skip(skip);
  const r = await dg.read.v1.text.analyze({ body: { text: LONG }, language: 'en', summarize: true, topics: true,
    intents: true, sentiment: true });
  assert.match(r.metadata.request_id, UUID);
  assert.ok(!Number.isNaN(Date.parse(r.metadata.created)));
  assert.equal(r.metadata.language, 'en');
  for (const k of ['summary_info', 'topics_info', 'intents_info', 'sentiment_info']) {
    assert.match(r.metadata[k].model_uuid, UUID, k);
    assert.ok(r.metadata[k].input_tokens > words(LONG) / 2, `${k} input_tokens`);
    assert.ok(r.metadata[k].output_tokens > 0, `${k} output_tokens`);
  }
  assert.equal(typeof r.results.summary.text, 'string');
  for (const [key, label] of [['topics', 'topic'], ['intents', 'intent']]) {
    const seg = r.results[key].segments[0];
    assert.equal(seg.start_word, 0);
    assert.equal(seg.end_word, words(LONG) - 1);
    assert.ok(seg[key].length >= 1 && seg[key].length <= 3, JSON.stringify(seg));
    for (const x of seg[key]) {
      assert.equal(typeof x[label], 'string');
      assert.ok(x.confidence_score > 0 && x.confidence_score <= 1);
    }
  }
  const s = r.results.sentiments;
  assert.ok(['positive', 'negative', 'neutral'].includes(s.segments[0].sentiment));
  assert.ok(s.segments[0].sentiment_score >= -1 && s.segments[0].sentiment_score <= 1);
  assert.deepEqual(s.average, { sentiment: s.segments[0].sentiment, sentiment_score: s.segments[0].sentiment_score });
});

test('strict custom topics and intents stay within the given labels', async (t) => {
  if (skip) return t.skip(skip);
  const res = await fetch(`${srv.url}/deepgram/v1/read?topics=true&intents=true&custom_topic=Refund&custom_topic=Shipping` +
    '&custom_topic_mode=strict&custom_intent=Cancel%20order&custom_intent_mode=strict', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: LONG }) });
  assert.equal(res.status, 200);
  const r = await res.json();
  for (const x of r.results.topics.segments[0].topics) assert.ok(['Refund', 'Shipping'].includes(x.topic), x.topic);
  for (const x of r.results.intents.segments[0].intents) assert.equal(x.intent, 'Cancel order');
});

test('a short text is its own summary; no feature, no text, other languages are 400s', async (t) => {
  if (skip) return t.skip(skip);
  const short = 'The parcel came two days late.';
  const r = await dg.read.v1.text.analyze({ body: { text: short }, summarize: true });
  assert.equal(r.results.summary.text, short);
  for (const [query, body, param] of [['summarize=false', { text: short }, 'summarize'], ['summarize=true', {}, 'text'],
    ['summarize=true&language=fr', { text: short }, 'language'],
    ['topics=true&custom_topic_mode=loose', { text: short }, 'custom_topic_mode']]) {
    const res = await fetch(`${srv.url}/deepgram/v1/read?${query}`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(res.status, 400, query);
    const e = await res.json();
    assert.equal(e.err_code, 'Bad Request', JSON.stringify(e));
    assert.match(e.err_msg, new RegExp(param));
  }
  await assert.rejects(dg.read.v1.text.analyze({ body: { text: short }, summarize: true, language: 'de' }),
    (e) => e instanceof DeepgramError && e.statusCode === 400);
});

// POST /listen with the intelligence options: the same features run on the
// transcript, in the pre-recorded shapes of spec 3.3 (summary v2 is
// {result, short}, not /read's {text}).
async function speech(text) {
  const res = await dg.speak.v1.audio.generate({ text, model: 'aura-orion-en', encoding: 'linear16', sample_rate: 16000 });
  return Buffer.from(await res.arrayBuffer());
}

test('listen summarize=v2, topics, intents, sentiment: results and *_info in the pre-recorded shapes', async (t) => {
  if (skip) return t.skip(skip);
  const wav = await speech('Go forward ten meters. Then turn left and stop.');
  const r = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3', punctuate: true, summarize: 'v2',
    topics: true, intents: true, sentiment: true });
  const alt = r.results.channels[0].alternatives[0];
  assert.match(alt.transcript.toLowerCase(), /forward/);
  const n = alt.transcript.trim().split(/\s+/).length;
  // under 50 words: the summary is the transcript itself, in the v2 shape
  assert.deepEqual(r.results.summary, { result: 'success', short: alt.transcript });
  assert.equal(r.results.summary.text, undefined);
  for (const [key, label] of [['topics', 'topic'], ['intents', 'intent']]) {
    const seg = r.results[key].segments[0];
    assert.equal(seg.text, alt.transcript);
    assert.equal(seg.start_word, 0);
    assert.equal(seg.end_word, n - 1);
    assert.ok(seg[key].length >= 1 && seg[key].length <= 3, JSON.stringify(seg));
    for (const x of seg[key]) {
      assert.equal(typeof x[label], 'string');
      assert.ok(x.confidence_score > 0 && x.confidence_score <= 1);
    }
  }
  const s = r.results.sentiments;
  assert.ok(['positive', 'negative', 'neutral'].includes(s.segments[0].sentiment));
  assert.equal(s.segments[0].end_word, n - 1);
  assert.deepEqual(s.average, { sentiment: s.segments[0].sentiment, sentiment_score: s.segments[0].sentiment_score });
  // the *_info blocks name the language model, not the speech model
  for (const k of ['summary_info', 'topics_info', 'intents_info', 'sentiment_info']) {
    assert.match(r.metadata[k].model_uuid, UUID, k);
    assert.notEqual(r.metadata[k].model_uuid, r.metadata.models[0], k);
  }
  for (const k of ['topics_info', 'intents_info', 'sentiment_info']) {
    assert.ok(r.metadata[k].input_tokens > n, `${k} input_tokens`);
    assert.ok(r.metadata[k].output_tokens > 0, `${k} output_tokens`);
  }
  assert.equal(r.metadata.summary_info.output_tokens, 0, 'a short transcript is summarised without generating');
  const warned = (r.metadata.warnings || []).map((w) => w.parameter);
  for (const p of ['summarize', 'topics', 'intents', 'sentiment']) assert.ok(!warned.includes(p), `warning for ${p}`);
});

test('listen: a long transcript is summarised by the model; strict custom labels; no intelligence without options', async (t) => {
  if (skip) return t.skip(skip);
  const wav = await speech(Array.from({ length: 8 }, () => 'Go forward ten meters. Then turn left and stop.').join(' '));
  const r = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3', summarize: true, topics: true,
    custom_topic: ['Navigation', 'Cooking'], custom_topic_mode: 'strict' });
  assert.ok(r.results.channels[0].alternatives[0].transcript.split(/\s+/).length >= 50);
  // a failed analysis is a warning in the answer: name it when this fails
  assert.equal(r.results.summary?.result, 'success', JSON.stringify(r.metadata.warnings));
  assert.equal(typeof r.results.summary.short, 'string');
  assert.ok(r.metadata.summary_info.output_tokens > 0);
  for (const x of r.results.topics.segments[0].topics) assert.ok(['Navigation', 'Cooking'].includes(x.topic), x.topic);
  assert.equal(r.results.intents, undefined);
  assert.equal(r.metadata.intents_info, undefined);
  const plain = await dg.listen.v1.media.transcribeFile(wav, { model: 'nova-3' });
  for (const k of ['summary', 'topics', 'intents', 'sentiments']) assert.equal(plain.results[k], undefined, k);
  const bad = await fetch(`${srv.url}/deepgram/v1/listen?topics=true&custom_topic_mode=loose`, {
    method: 'POST', headers: { 'content-type': 'audio/wav' }, body: wav });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).err_msg, /custom_topic_mode/);
});

test('without --default-model: the smallest chat model, then the loaded one; never a 503 while one exists', async (t) => {
  const dir = await makeModelsDir({ bert: true, hermes: true });
  if (dir.skip || dir.bertSkip || dir.hermesSkip) return t.skip(dir.skip || dir.bertSkip || dir.hermesSkip);
  const s = await startServer({ args: ['--models-dir', dir.dir], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  try {
    const client = new DeepgramClient({ apiKey: 'k', baseUrl: `${s.url}/deepgram` });
    const loaded = async () => (await (await fetch(`${s.url}/api/ps`)).json()).models.map((m) => m.name);
    // three models (two chat, one embedding), none loaded: the smaller chat model
    const first = await client.read.v1.text.analyze({ body: { text: 'Hello there.' }, language: 'en', sentiment: true });
    assert.match(first.metadata.sentiment_info.model_uuid, UUID);
    assert.deepEqual(await loaded(), ['org/tiny']);
    // a loaded chat model is used before loading another: load org/hermes, unload org/tiny
    const gen = await fetch(`${s.url}/api/generate`, { method: 'POST', body: JSON.stringify({ model: 'org/hermes' }) });
    assert.equal(gen.status, 200, await gen.text());
    const un = await fetch(`${s.url}/api/generate`, { method: 'POST', body: JSON.stringify({ model: 'org/tiny', keep_alive: 0 }) });
    assert.equal(un.status, 200);
    for (let i = 0; i < 300 && (await loaded()).includes('org/tiny'); i++) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(await loaded(), ['org/hermes']);
    const root = new DeepgramClient({ apiKey: 'k', baseUrl: s.url });
    const second = await root.read.v1.text.analyze({ body: { text: 'Hello there.' }, language: 'en', sentiment: true });
    assert.notEqual(second.metadata.sentiment_info.model_uuid, first.metadata.sentiment_info.model_uuid);
    assert.deepEqual(await loaded(), ['org/hermes']);
  } finally {
    const code = await s.stop();
    dir.cleanup();
    assert.equal(code, 0);
  }
});
