// realtime.test.mjs - the OpenAI Realtime API (../shared/specs/openai.md
// section 7) over a plain WebSocket with the pinned `ws` package: REST
// client secrets and ephemeral-key auth (and their expiry), text turns in
// the GA and beta vocabularies, a spoken turn through server VAD, speech to
// text, the model and speech back, response.cancel, transcription sessions,
// and errors that name the offending event. The model is random-weight:
// the tests check event shapes and order, never the words.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';
import { connect, speechPcm24k, streamPcm } from './rt.mjs';

const MODEL = 'org/tiny';
const KEY = 'sk-realtime-test';
const AUTH = { Authorization: `Bearer ${KEY}` };
let srv, models, skip, hermesSkip;

before(async () => {
  models = await makeModelsDir({ hermes: true });
  if (models.skip) { skip = models.skip; return; }
  hermesSkip = models.hermesSkip;
  srv = await startServer({
    args: ['--models-dir', models.dir, '--default-model', MODEL, '--api-key', KEY],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const post = (path, body, headers = AUTH) => fetch(`${srv.url}${path}`, {
  method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body),
});

// Every event has a unique string event_id.
function assertEventIds(c) {
  const ids = c.events.map((e) => e.event_id);
  for (const id of ids) assert.equal(typeof id, 'string');
  assert.equal(new Set(ids).size, ids.length, 'event_ids are unique');
}

// `seq` appears in `types` in this relative order.
function assertOrder(types, seq) {
  let at = -1;
  for (const t of seq) {
    const k = types.indexOf(t, at + 1);
    assert.ok(k > at, `${t} after index ${at} in ${types.join(', ')}`);
    at = k;
  }
}

test('client_secrets mints an ephemeral key that opens a session; a bad key is refused', async (t) => {
  if (skip) return t.skip(skip);
  const r = await post('/v1/realtime/client_secrets', {
    expires_after: { anchor: 'created_at', seconds: 600 },
    session: { type: 'realtime', model: MODEL, instructions: 'Be brief.', output_modalities: ['text'] },
  });
  assert.equal(r.status, 200);
  const body = await r.json();
  assert.match(body.value, /^ek_/);
  assert.ok(body.expires_at > Date.now() / 1000 + 500);
  assert.equal(body.session.type, 'realtime');
  assert.equal(body.session.object, 'realtime.session');
  assert.match(body.session.id, /^sess_/);
  assert.deepEqual(body.session.output_modalities, ['text']);
  assert.deepEqual(body.session.audio.input.format, { type: 'audio/pcm', rate: 24000 });

  // The key carries its session configuration.
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: { Authorization: `Bearer ${body.value}` } });
  const created = await c.waitFor('session.created');
  assert.equal(created.session.instructions, 'Be brief.');
  assert.deepEqual(created.session.output_modalities, ['text']);
  c.close();

  // The browser form: the key in a subprotocol, answered with "realtime".
  const b = await connect(srv.url, { query: `model=${MODEL}`, protocols: ['realtime', `openai-insecure-api-key.${KEY}`] });
  assert.equal(b.protocol, 'realtime');
  await b.waitFor('session.created');
  b.close();

  await assert.rejects(connect(srv.url, { query: `model=${MODEL}`, headers: { Authorization: 'Bearer wrong' } }),
    (e) => e.status === 401 && e.body.error.code === 'invalid_api_key');
  await assert.rejects(connect(srv.url, { query: `model=${MODEL}`, headers: { Authorization: 'Bearer ek_0000' } }),
    (e) => e.status === 401 && e.body.error.code === 'invalid_api_key');
  const bad = await post('/v1/realtime/client_secrets', { expires_after: { anchor: 'created_at', seconds: 5 } });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.param, 'expires_after.seconds');
  const noType = await post('/v1/realtime/client_secrets', { session: { model: MODEL } });
  assert.equal(noType.status, 400);
  assert.equal((await noType.json()).error.param, 'session.type');
});

test('beta REST: sessions and transcription_sessions return a client_secret', async (t) => {
  if (skip) return t.skip(skip);
  const r = await post('/v1/realtime/sessions', { model: MODEL, modalities: ['text'], voice: 'alloy',
    input_audio_format: 'g711_ulaw', turn_detection: null }, { ...AUTH, 'OpenAI-Beta': 'assistants=v2' });
  assert.equal(r.status, 200);
  const s = await r.json();
  assert.equal(s.object, 'realtime.session');
  assert.match(s.client_secret.value, /^ek_/);
  assert.ok(Number.isInteger(s.client_secret.expires_at));
  assert.equal(s.input_audio_format, 'g711_ulaw');
  assert.equal(s.turn_detection, null);
  assert.deepEqual(s.modalities, ['text']);
  const tr = await post('/v1/realtime/transcription_sessions', {
    input_audio_format: 'pcm16', input_audio_transcription: { model: 'gpt-4o-transcribe', language: 'en' },
  });
  assert.equal(tr.status, 200);
  const ts = await tr.json();
  assert.equal(ts.object, 'realtime.transcription_session');
  assert.equal(ts.input_audio_transcription.language, 'en');
  assert.match(ts.client_secret.value, /^ek_/);
  const bad = await post('/v1/realtime/sessions', { input_audio_format: 'mp3' });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.param, 'input_audio_format');
});

test('GA text turn: item.create + response.create give the documented event order', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  const created = await c.waitFor('session.created');
  assert.equal(created.session.type, 'realtime');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'], instructions: 'Reply.' } });
  const upd = await c.waitFor('session.updated');
  assert.deepEqual(upd.session.output_modalities, ['text']);
  const from = c.events.length;
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user',
    content: [{ type: 'input_text', text: 'Hello there' }] } });
  const added = await c.waitFor('conversation.item.added', { from });
  assert.equal(added.item.role, 'user');
  await c.waitFor('conversation.item.done', { from });
  c.send({ type: 'response.create', response: { max_output_tokens: 12 } });
  const done = await c.waitFor('response.done', { from });
  const types = c.types(from);
  assertOrder(types, ['conversation.item.added', 'conversation.item.done', 'response.created', 'rate_limits.updated',
    'response.output_item.added', 'conversation.item.added', 'response.content_part.added',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
    'conversation.item.done', 'response.done']);
  assert.ok(!types.some((x) => x.startsWith('response.text.')), 'no beta names in GA');
  assert.ok(['completed', 'incomplete'].includes(done.response.status));
  assert.equal(done.response.object, 'realtime.response');
  assert.equal(done.response.output.length, 1);
  const msg = done.response.output[0];
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.content[0].type, 'output_text');
  const deltas = c.events.slice(from).filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(msg.content[0].text, deltas);
  assert.ok(done.response.usage.input_tokens > 0);
  assert.equal(done.response.usage.total_tokens, done.response.usage.input_tokens + done.response.usage.output_tokens);
  // The assistant item joined the conversation.
  c.send({ type: 'conversation.item.retrieve', item_id: msg.id });
  const got = await c.waitFor('conversation.item.retrieved', { from });
  assert.equal(got.item.id, msg.id);
  // Out of band: conversation "none" adds nothing to the conversation.
  const from2 = c.events.length;
  c.send({ type: 'response.create', response: { conversation: 'none', max_output_tokens: 4, metadata: { tag: 'oob' },
    input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Summarize.' }] }] } });
  const oob = await c.waitFor('response.done', { from: from2 });
  assert.equal(oob.response.conversation_id, null);
  assert.deepEqual(oob.response.metadata, { tag: 'oob' });
  assert.ok(!c.types(from2).includes('conversation.item.added'));
  assertEventIds(c);
  c.close();
});

test('beta protocol: OpenAI-Beta realtime=v1 switches to the beta names and session layout', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: { ...AUTH, 'OpenAI-Beta': 'realtime=v1' } });
  const created = await c.waitFor('session.created');
  assert.equal(created.session.input_audio_format, 'pcm16');
  assert.ok(Array.isArray(created.session.modalities));
  await c.waitFor('conversation.created');
  c.send({ type: 'session.update', session: { modalities: ['text'], temperature: 0.7 } });
  const upd = await c.waitFor('session.updated');
  assert.deepEqual(upd.session.modalities, ['text']);
  const from = c.events.length;
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
  await c.waitFor('conversation.item.created', { from });
  c.send({ type: 'response.create', response: { max_response_output_tokens: 6 } });
  const done = await c.waitFor('response.done', { from });
  const types = c.types(from);
  assertOrder(types, ['conversation.item.created', 'response.created', 'response.output_item.added',
    'conversation.item.created', 'response.content_part.added', 'response.text.done', 'response.content_part.done',
    'response.output_item.done', 'response.done']);
  assert.ok(!types.includes('conversation.item.added') && !types.includes('conversation.item.done'));
  assert.ok(!types.some((x) => x.startsWith('response.output_text')));
  assert.equal(done.response.output[0].content[0].type, 'text');
  assert.deepEqual(done.response.modalities, ['text']);
  assertEventIds(c);
  c.close();
});

test('bad events are error events naming the event; the session stays usable', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'no.such.event', event_id: 'evt_bad_1' });
  const e1 = await c.waitFor('error');
  assert.equal(e1.error.event_id, 'evt_bad_1');
  assert.equal(e1.error.type, 'invalid_request_error');
  assert.equal(e1.error.param, 'type');
  c.send('{not json');
  await c.waitFor('error', { pred: (e) => e.error.code === 'invalid_json' });
  c.send({ type: 'input_audio_buffer.append', audio: '@@not base64@@', event_id: 'evt_b64' });
  const e3 = await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_b64' });
  assert.equal(e3.error.param, 'audio');
  c.send({ type: 'session.update', event_id: 'evt_sess', session: { type: 'realtime', audio: { output: { format: { type: 'audio/mp3' } } } } });
  const e4 = await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_sess' });
  assert.equal(e4.error.param, 'session.audio.output.format');
  c.send({ type: 'session.update', event_id: 'evt_voice', session: { type: 'realtime', audio: { output: { voice: 'no-such-voice' } } } });
  const ev = await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_voice' });
  assert.equal(ev.error.param, 'session.audio.output.voice');
  c.send({ type: 'session.update', event_id: 'evt_notype', session: { instructions: 'x' } });
  const e5 = await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_notype' });
  assert.equal(e5.error.param, 'session.type');
  c.send({ type: 'input_audio_buffer.commit', event_id: 'evt_empty' });
  const e6 = await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_empty' });
  assert.equal(e6.error.code, 'input_audio_buffer_commit_empty');
  c.send({ type: 'response.cancel', event_id: 'evt_cancel' });
  const e7 = await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_cancel' });
  assert.equal(e7.error.code, 'response_cancel_not_active');
  c.send({ type: 'conversation.item.delete', item_id: 'item_missing', event_id: 'evt_del' });
  const e8 = await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_del' });
  assert.equal(e8.error.code, 'item_not_found');
  c.send({ type: 'conversation.item.create', event_id: 'evt_item', item: { type: 'message', role: 'robot', content: [] } });
  await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_item' });
  // Still alive: an item can be created, deleted and the buffer cleared.
  c.send({ type: 'conversation.item.create', item: { id: 'item_keep', type: 'message', role: 'system', content: [{ type: 'input_text', text: 'x' }] } });
  await c.waitFor('conversation.item.done', { pred: (e) => e.item.id === 'item_keep' });
  c.send({ type: 'conversation.item.delete', item_id: 'item_keep' });
  assert.equal((await c.waitFor('conversation.item.deleted')).item_id, 'item_keep');
  c.send({ type: 'input_audio_buffer.clear' });
  await c.waitFor('input_audio_buffer.cleared');
  // Over 15 MiB (but under the WebSocket layer's 16 MiB): an error, not a disconnect.
  c.send({ type: 'input_audio_buffer.append', audio: 'A'.repeat(15.5 * 1024 * 1024) });
  await c.waitFor('error', { pred: (e) => e.error.code === 'event_too_large' });
  c.send({ type: 'input_audio_buffer.clear' });
  await c.waitFor('input_audio_buffer.cleared', { from: c.events.length - 1 });
  assertEventIds(c);
  c.close();
});

test('response.cancel ends the running response with status cancelled', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
  await c.waitFor('session.updated');
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Tell a long story' }] } });
  // The random test model can reach its end-of-text token within a few
  // tokens, finishing before the cancel arrives ('completed'): try again
  // then, up to 5 responses; one of them must end cancelled.
  let created, done;
  for (let attempt = 0; attempt < 5; attempt++) {
    const from = c.events.length;
    c.send({ type: 'response.create', response: { max_output_tokens: 'inf' } });
    created = await c.waitFor('response.created', { from });
    c.send({ type: 'response.cancel', response_id: created.response.id });
    done = await c.waitFor('response.done', { from });
    assert.equal(done.response.id, created.response.id);
    if (done.response.status !== 'completed') break;
  }
  assert.equal(done.response.status, 'cancelled');
  assert.equal(done.response.status_details.reason, 'client_cancelled');
  // A new response can start afterwards.
  const from = c.events.length;
  c.send({ type: 'response.create', response: { max_output_tokens: 3 } });
  assert.notEqual((await c.waitFor('response.done', { from })).response.status, 'cancelled');
  c.close();
});

test('spoken turn: server VAD, transcription, then a response with audio deltas', async (t) => {
  if (skip) return t.skip(skip);
  const pcm = speechPcm24k();
  if (!pcm) return t.skip('pocketsphinx-testdata (goforward.raw) is not installed');
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio'], max_output_tokens: 8,
    audio: { input: { transcription: { model: 'whisper-1' },
      turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500, create_response: true } },
    output: { voice: 'alloy' } } } });
  await c.waitFor('session.updated');
  const from = c.events.length;
  const sent = await streamPcm(c, pcm, { chunkMs: 20, realTime: true });
  const started = await c.waitFor('input_audio_buffer.speech_started', { from });
  const stopped = await c.waitFor('input_audio_buffer.speech_stopped', { from });
  // Fed in real time, the VAD's events follow the audio that caused them
  // (about 100 ms on an idle machine; the figure is printed, not asserted).
  // The bound only tells "fired by the pause" from "fired by a later commit or
  // the end of the stream", so a loaded machine does not fail it.
  const base = c.events.find((e) => e.type === 'session.updated').receivedAt;
  const cause = sent[Math.min(sent.length - 1, Math.floor((stopped.audio_end_ms - 1) / 20))];
  const lag = stopped.receivedAt - cause;
  t.diagnostic(`speech_stopped ${lag.toFixed(0)} ms after the chunk that ended the pause was sent`);
  assert.ok(lag > -5 && lag < 2000 && started.receivedAt > base, `speech_stopped lagged ${lag.toFixed(0)} ms`);
  assert.ok(started.audio_start_ms >= 0 && started.audio_start_ms < 2000, `start ${started.audio_start_ms}`);
  assert.ok(stopped.audio_end_ms > started.audio_start_ms + 500);
  assert.equal(stopped.item_id, started.item_id);
  const committed = await c.waitFor('input_audio_buffer.committed', { from });
  assert.equal(committed.item_id, started.item_id);
  const tr = await c.waitFor('conversation.item.input_audio_transcription.completed', { from });
  assert.equal(tr.item_id, started.item_id);
  assert.match(tr.transcript, /forward/, `transcript: ${tr.transcript}`);
  const done = await c.waitFor('response.done', { from, ms: 120000 });
  const types = c.types(from);
  assertOrder(types, ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped',
    'input_audio_buffer.committed', 'conversation.item.added', 'conversation.item.input_audio_transcription.completed',
    'response.created', 'response.output_item.added', 'response.content_part.added',
    'response.output_audio.done', 'response.output_audio_transcript.done', 'response.output_item.done', 'response.done']);
  const msg = done.response.output[0];
  assert.equal(msg.content[0].type, 'output_audio');
  const audio = c.events.slice(from).filter((e) => e.type === 'response.output_audio.delta');
  if (msg.content[0].transcript.trim()) {
    assert.ok(audio.length > 0, 'audio deltas for a non-empty transcript');
    const bytes = audio.reduce((n, e) => n + Buffer.from(e.delta, 'base64').length, 0);
    assert.equal(bytes % 2, 0, 'whole pcm16 samples');
  }
  // The user item now carries its transcript.
  c.send({ type: 'conversation.item.retrieve', item_id: started.item_id });
  const user = await c.waitFor('conversation.item.retrieved', { from });
  assert.equal(user.item.content[0].transcript, tr.transcript);
  assertEventIds(c);
  c.close();
});

test('transcription session: ?intent=transcription, manual commit, no responses', async (t) => {
  if (skip) return t.skip(skip);
  const pcm = speechPcm24k({ leadMs: 100, tailMs: 100 });
  if (!pcm) return t.skip('pocketsphinx-testdata (goforward.raw) is not installed');
  const c = await connect(srv.url, { query: 'intent=transcription', headers: AUTH });
  const created = await c.waitFor('session.created');
  assert.equal(created.session.type, 'transcription');
  c.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { turn_detection: null } } } });
  await c.waitFor('session.updated');
  await streamPcm(c, pcm, { chunkMs: 100 });
  c.send({ type: 'input_audio_buffer.commit' });
  const committed = await c.waitFor('input_audio_buffer.committed');
  const tr = await c.waitFor('conversation.item.input_audio_transcription.completed');
  assert.equal(tr.item_id, committed.item_id);
  assert.match(tr.transcript, /forward/);
  assert.equal(tr.usage.type, 'duration');
  assert.ok(!c.types().some((x) => x.startsWith('response.')));
  c.send({ type: 'response.create', event_id: 'evt_resp' });
  await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_resp' });
  c.close();
});

test('an expired client secret is refused with 401', async (t) => {
  if (skip) return t.skip(skip);
  const r = await post('/v1/realtime/client_secrets', { expires_after: { anchor: 'created_at', seconds: 10 },
    session: { type: 'realtime' } });
  const { value, expires_at: exp } = await r.json();
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: { Authorization: `Bearer ${value}` } });
  await c.waitFor('session.created');
  c.close();
  await new Promise((res) => setTimeout(res, Math.max(0, exp * 1000 - Date.now()) + 1100));
  await assert.rejects(connect(srv.url, { query: `model=${MODEL}`, headers: { Authorization: `Bearer ${value}` } }),
    (e) => e.status === 401 && e.body.error.code === 'invalid_api_key' && /expired/.test(e.body.error.message));
});

test('function call round trip: forced call events, then function_call_output and a new response', async (t) => {
  if (skip || hermesSkip) return t.skip(skip || hermesSkip);
  const c = await connect(srv.url, { query: 'model=org/hermes', headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'], tools: [{
    type: 'function', name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }] } });
  await c.waitFor('session.updated');
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] } });
  const from = c.events.length;
  c.send({ type: 'response.create', response: { tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 400 } });
  const done = await c.waitFor('response.done', { from });
  const types = c.types(from);
  assertOrder(types, ['response.created', 'response.output_item.added', 'conversation.item.added',
    'response.function_call_arguments.done', 'response.output_item.done', 'conversation.item.done', 'response.done']);
  const call = done.response.output.find((o) => o.type === 'function_call');
  assert.ok(call, `a function_call item in ${JSON.stringify(done.response.output)}`);
  assert.equal(call.name, 'get_weather');
  const argsDone = c.events.slice(from).find((e) => e.type === 'response.function_call_arguments.done');
  assert.equal(argsDone.call_id, call.call_id);
  assert.equal(argsDone.arguments, call.arguments);
  const deltas = c.events.slice(from).filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
  assert.equal(deltas, call.arguments);
  // The grammar makes the arguments valid JSON once the call is complete.
  if (done.response.status === 'completed') assert.equal(typeof JSON.parse(call.arguments).city, 'string');
  // The client answers the call and asks for the next turn.
  const from2 = c.events.length;
  c.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: call.call_id, output: '{"temp_c":21}' } });
  await c.waitFor('conversation.item.done', { from: from2 });
  c.send({ type: 'response.create', response: { tool_choice: 'none', max_output_tokens: 5 } });
  const next = await c.waitFor('response.done', { from: from2 });
  assert.ok(['completed', 'incomplete'].includes(next.response.status), JSON.stringify(next.response.status_details));
  c.close();
});

test('barge-in: speech during a response cancels it with reason turn_detected', async (t) => {
  if (skip) return t.skip(skip);
  const pcm = speechPcm24k({ leadMs: 0, tailMs: 800 });
  if (!pcm) return t.skip('pocketsphinx-testdata (goforward.raw) is not installed');
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio'],
    audio: { input: { turn_detection: { type: 'server_vad', create_response: false, interrupt_response: true } } } } });
  await c.waitFor('session.updated');
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Talk for a long time' }] } });
  c.send({ type: 'response.create', response: { max_output_tokens: 'inf' } });
  const created = await c.waitFor('response.created');
  await c.waitFor('response.output_audio_transcript.delta');
  await streamPcm(c, pcm);
  await c.waitFor('input_audio_buffer.speech_started');
  const done = await c.waitFor('response.done', { pred: (e) => e.response.id === created.response.id });
  assert.equal(done.response.status, 'cancelled');
  assert.equal(done.response.status_details.reason, 'turn_detected');
  await c.waitFor('input_audio_buffer.committed');
  c.close();
});

test('G.711 formats: u-law in, A-law out (beta strings)', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: { ...AUTH, 'OpenAI-Beta': 'realtime=v1' } });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { modalities: ['text', 'audio'], input_audio_format: 'g711_ulaw',
    output_audio_format: 'g711_alaw', turn_detection: null, max_response_output_tokens: 6 } });
  const upd = await c.waitFor('session.updated');
  assert.equal(upd.session.input_audio_format, 'g711_ulaw');
  assert.equal(upd.session.output_audio_format, 'g711_alaw');
  // 300 ms of u-law silence (0xFF) commits as a user item.
  c.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(2400, 0xff).toString('base64') });
  c.send({ type: 'input_audio_buffer.commit' });
  await c.waitFor('input_audio_buffer.committed');
  await c.waitFor('conversation.item.created', { pred: (e) => e.item.role === 'user' });
  c.send({ type: 'response.create' });
  const done = await c.waitFor('response.done');
  assert.equal(done.response.output_audio_format, 'g711_alaw');
  assert.equal(done.response.output[0].content[0].type, 'audio');
  assert.ok(!c.types().some((x) => x.startsWith('response.output_audio')), 'beta names only');
  c.close();
});

test('conversation.item.truncate cuts an assistant audio item to what was heard', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio'], max_output_tokens: 30 } });
  await c.waitFor('session.updated');
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Speak' }] } });
  c.send({ type: 'response.create' });
  const done = await c.waitFor('response.done');
  const item = done.response.output[0];
  const bytes = c.events.filter((e) => e.type === 'response.output_audio.delta')
    .reduce((n, e) => n + Buffer.from(e.delta, 'base64').length, 0);
  const ms = Math.floor(bytes / 48);
  if (ms < 200) return t.skip(`only ${ms} ms of audio came back (the random model wrote almost nothing)`);
  c.send({ type: 'conversation.item.truncate', item_id: item.id, content_index: 0, audio_end_ms: ms + 5000, event_id: 'evt_long' });
  const e = await c.waitFor('error', { pred: (x) => x.error.event_id === 'evt_long' });
  assert.equal(e.error.param, 'audio_end_ms');
  c.send({ type: 'conversation.item.truncate', item_id: item.id, content_index: 0, audio_end_ms: 100 });
  const tr = await c.waitFor('conversation.item.truncated');
  assert.deepEqual([tr.item_id, tr.content_index, tr.audio_end_ms], [item.id, 0, 100]);
  c.send({ type: 'conversation.item.retrieve', item_id: item.id });
  const got = await c.waitFor('conversation.item.retrieved');
  assert.ok(got.item.content[0].transcript.length < item.content[0].transcript.length);
  c.close();
});

test('beta transcription session: transcription_session.created/updated', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: 'intent=transcription', headers: { ...AUTH, 'OpenAI-Beta': 'realtime=v1' } });
  const created = await c.waitFor('transcription_session.created');
  assert.equal(created.session.object, 'realtime.transcription_session');
  c.send({ type: 'transcription_session.update', session: { input_audio_transcription: { model: 'gpt-4o-transcribe', language: 'en' }, turn_detection: null } });
  const upd = await c.waitFor('transcription_session.updated');
  assert.equal(upd.session.input_audio_transcription.language, 'en');
  assert.equal(upd.session.turn_detection, null);
  assert.ok(!c.types().includes('conversation.created'));
  c.close();
});

test('limits: a session ends at its maximum duration; sessions past the limit are refused', async (t) => {
  if (skip) return t.skip(skip);
  const short = await startServer({ args: ['--models-dir', models.dir, '--default-model', MODEL],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1', PARLEY_REALTIME_MAX_SESSION_S: '2', PARLEY_REALTIME_MAX_SESSIONS: '1' } });
  try {
    const first = await connect(short.url, { query: `model=${MODEL}` });
    await first.waitFor('session.created');
    await assert.rejects(connect(short.url, { query: `model=${MODEL}` }),
      (e) => e.status === 429 && /limit is 1/.test(e.body.error.message));
    const gone = new Promise((r) => first.ws.once('close', r));
    first.close();
    await gone;
    await new Promise((r) => setTimeout(r, 200));
    const c = await connect(short.url, { query: `model=${MODEL}` });
    const created = await c.waitFor('session.created');
    assert.ok(created.session.expires_at <= Math.ceil(Date.now() / 1000) + 2);
    const closed = new Promise((r) => c.ws.once('close', (code) => r(code)));
    const e = await c.waitFor('error', { ms: 10000 });
    assert.equal(e.error.code, 'session_expired');
    assert.equal(await closed, 1000);
  } finally {
    await short.stop();
  }
});

test('an input_audio item created without a transcript is transcribed', async (t) => {
  if (skip) return t.skip(skip);
  const pcm = speechPcm24k({ leadMs: 100, tailMs: 100 });
  if (!pcm) return t.skip('pocketsphinx-testdata (goforward.raw) is not installed');
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user',
    content: [{ type: 'input_audio', audio: pcm.toString('base64') }] } });
  const added = await c.waitFor('conversation.item.added');
  assert.match(added.item.content[0].transcript, /forward/);
  c.send({ type: 'conversation.item.create', event_id: 'evt_badaudio', item: { type: 'message', role: 'user',
    content: [{ type: 'input_audio', audio: 'not base64!' }] } });
  await c.waitFor('error', { pred: (e) => e.error.event_id === 'evt_badaudio' });
  c.close();
});

test('a conversation longer than the context drops its oldest turns instead of failing', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
  await c.waitFor('session.updated');
  const long = 'the quick brown fox jumps over the lazy dog '.repeat(20);
  for (let i = 0; i < 12; i++)
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: i % 2 ? 'assistant' : 'user',
      content: [{ type: i % 2 ? 'output_text' : 'input_text', text: `${i}: ${long}` }] } });
  c.send({ type: 'response.create', response: { max_output_tokens: 4 } });
  const done = await c.waitFor('response.done');
  assert.notEqual(done.response.status, 'failed', JSON.stringify(done.response.status_details));
  assert.ok(done.response.usage.input_tokens < 1024);
  c.close();
});

test('server_vad idle_timeout_ms: silence commits the buffer with timeout_triggered and prompts a response', async (t) => {
  if (skip) return t.skip(skip);
  const c = await connect(srv.url, { query: `model=${MODEL}`, headers: AUTH });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'], max_output_tokens: 3,
    audio: { input: { turn_detection: { type: 'server_vad', idle_timeout_ms: 500 } } } } });
  const upd = await c.waitFor('session.updated');
  assert.equal(upd.session.audio.input.turn_detection.idle_timeout_ms, 500);
  const from = c.events.length;
  await streamPcm(c, Buffer.alloc(2 * 24 * 800));
  const to = await c.waitFor('input_audio_buffer.timeout_triggered', { from });
  assert.ok(to.audio_end_ms - to.audio_start_ms >= 500);
  const committed = await c.waitFor('input_audio_buffer.committed', { from });
  assert.equal(committed.item_id, to.item_id);
  await c.waitFor('response.done', { from });
  assertOrder(c.types(from), ['input_audio_buffer.timeout_triggered', 'input_audio_buffer.committed', 'response.created']);
  c.close();
});
