// sdk.test.mjs - the official `openai` SDK's realtime clients against the
// local server: `client.realtime.clientSecrets.create` and the GA
// OpenAIRealtimeWS, `client.beta.realtime.sessions.create` and the beta
// OpenAIRealtimeWS (OpenAI-Beta: realtime=v1). The SDK always dials wss:;
// parley serves plain HTTP here, so the tests hand the `ws` client a
// createConnection that opens a plain TCP socket to the server (the SDK's
// URL building, headers, event parsing and emitter are what is exercised).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { OpenAIRealtimeWS as BetaRealtimeWS } from 'openai/beta/realtime/ws';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const MODEL = 'org/tiny';
const KEY = 'sk-sdk-test';
let srv, models, skip;

before(async () => {
  models = await makeModelsDir();
  if (models.skip) { skip = models.skip; return; }
  srv = await startServer({ args: ['--models-dir', models.dir, '--default-model', MODEL, '--api-key', KEY],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const plain = () => ({ createConnection: () => net.connect(srv.port, '127.0.0.1') });

// Collects events until `until` arrives (or an error event / socket error).
function run(rt, until) {
  const seen = [];
  return new Promise((resolve, reject) => {
    rt.on('event', (e) => seen.push(e));
    rt.on('error', (e) => reject(e));
    rt.on(until, () => resolve(seen));
  });
}

test('GA: a client secret from the SDK opens OpenAIRealtimeWS; a text turn completes', async (t) => {
  if (skip) return t.skip(skip);
  const admin = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const secret = await admin.realtime.clientSecrets.create({
    expires_after: { anchor: 'created_at', seconds: 120 },
    session: { type: 'realtime', model: MODEL, output_modalities: ['text'] },
  });
  assert.match(secret.value, /^ek_/);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: secret.value, maxRetries: 0 });
  const rt = new OpenAIRealtimeWS({ model: MODEL, options: plain() }, client);
  const events = run(rt, 'response.done');
  await new Promise((r) => rt.socket.once('open', r));
  rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello' }] } });
  rt.send({ type: 'response.create', response: { max_output_tokens: 5 } });
  const seen = await events;
  rt.close();
  assert.equal(seen[0].type, 'session.created');
  assert.deepEqual(seen[0].session.output_modalities, ['text']);
  const done = seen.at(-1);
  assert.equal(done.type, 'response.done');
  assert.equal(done.response.output[0].content[0].type, 'output_text');
  assert.ok(seen.some((e) => e.type === 'conversation.item.added'));
});

test('beta: sessions.create + the beta OpenAIRealtimeWS speak the beta vocabulary', async (t) => {
  if (skip) return t.skip(skip);
  const admin = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const sess = await admin.beta.realtime.sessions.create({ model: MODEL, modalities: ['text'] });
  assert.match(sess.client_secret.value, /^ek_/);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: sess.client_secret.value, maxRetries: 0 });
  const rt = new BetaRealtimeWS({ model: MODEL, options: plain() }, client);
  const events = run(rt, 'response.done');
  await new Promise((r) => rt.socket.once('open', r));
  rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
  rt.send({ type: 'response.create', response: { max_response_output_tokens: 5 } });
  const seen = await events;
  rt.close();
  const types = seen.map((e) => e.type);
  assert.deepEqual(types.slice(0, 2), ['session.created', 'conversation.created']);
  assert.deepEqual(seen[0].session.modalities, ['text']);
  assert.ok(types.includes('conversation.item.created'));
  assert.ok(types.includes('response.text.done'));
  assert.ok(!types.some((x) => x.startsWith('response.output_text')));
  const tr = await admin.beta.realtime.transcriptionSessions.create({ input_audio_format: 'pcm16' });
  assert.equal(tr.object, 'realtime.transcription_session');
});

test('GA: an error event reaches the SDK as an error with the event id', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const rt = new OpenAIRealtimeWS({ model: MODEL, options: plain() }, client);
  await new Promise((r) => rt.socket.once('open', r));
  const err = new Promise((r) => rt.on('error', r));
  rt.send({ type: 'response.cancel', event_id: 'evt_sdk' });
  const e = await err;
  assert.equal(e.error?.event_id ?? e.event_id, 'evt_sdk');
  rt.close();
});
