// surface.test.mjs - the whole OpenAI surface answers honestly (issue 6
// items 8 and 9): every method+path of ../shared/specs/openai-paths.tsv is
// either implemented (a minimal request gets neither 404, 500 nor 501) or
// answers exactly the 501 `not_implemented_local` error; and every OpenAI
// route answers under the /v1-less and the doubled /v1/v1 prefix, through
// the official `openai` SDK (baseURL without /v1, and ending in /v1/v1) and
// raw requests. Other dialects' paths (/api/..., /, /health) are untouched.
//
// IMPLEMENTED below lists the operations parley implements, each with a
// minimal request. An engineer who implements an operation adds one line
// there; the walk fails, naming the operation, until that is done.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir, SHARED } from '../lib/models.mjs';

// ../shared/specs' list when it is there, else the copy beside this file
// (a fresh clone): method, path, operationId and group of every operation
// of OpenAI's API reference, one a line.
const SHARED_TSV = path.join(SHARED, 'specs/openai-paths.tsv');
const TSV = existsSync(SHARED_TSV) ? SHARED_TSV
  : path.join(path.dirname(new URL(import.meta.url).pathname), 'openai-paths.tsv');
const MODEL = 'org/tiny';
const EMBED = 'embed';
let srv, models, skip = null, ops = [];

before(async () => {
  if (!existsSync(TSV)) { skip = `the OpenAI path list ${TSV} is absent (../shared not mounted)`; return; }
  ops = readFileSync(TSV, 'utf8').split('\n').filter(Boolean).map((line) => {
    const [method, p, operation, group] = line.split('\t');
    const [tmpl, query = ''] = p.split('?');
    return { method, tmpl, query, operation, group, key: `${method} ${tmpl}` };
  });
  models = await makeModelsDir({ bert: true });
  if (models.skip) { skip = models.skip; return; }
  srv = await startServer({
    args: ['--models-dir', models.dir, '--default-model', MODEL, '--parallel', '2'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
});
after(async () => {
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
  if (models?.cleanup) models.cleanup();
});

// ---- raw helpers -----------------------------------------------------------

const jsonReq = (method, p, body) => fetch(srv.url + p, {
  method, headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
  body: body === undefined ? undefined : JSON.stringify(body),
});
async function newFile(prefix = '/v1') {
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob(['{"a":1}\n']), 'x.jsonl');
  const r = await fetch(`${srv.url}${prefix}/files`, { method: 'POST', body: form });
  assert.equal(r.status, 200, `creating a file: ${await r.clone().text()}`);
  return (await r.json()).id;
}
async function newUpload(prefix = '/v1') {
  const r = await jsonReq('POST', `${prefix}/uploads`, { filename: 'u.txt', purpose: 'batch', bytes: 3, mime_type: 'text/plain' });
  assert.equal(r.status, 200, `creating an upload: ${await r.clone().text()}`);
  return (await r.json()).id;
}
async function addPart(uploadId, prefix = '/v1') {
  const form = new FormData();
  form.append('data', new Blob(['abc']), 'part');
  const r = await fetch(`${srv.url}${prefix}/uploads/${uploadId}/parts`, { method: 'POST', body: form });
  assert.equal(r.status, 200, `adding a part: ${await r.clone().text()}`);
  return (await r.json()).id;
}

async function newResponse(extra = {}) {
  const r = await jsonReq('POST', '/v1/responses', { model: MODEL, input: 'hi', max_output_tokens: 16, ...extra });
  assert.equal(r.status, 200, `creating a response: ${await r.clone().text()}`);
  return (await r.json()).id;
}
async function newConversation() {
  const r = await jsonReq('POST', '/v1/conversations', { items: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.status, 200, `creating a conversation: ${await r.clone().text()}`);
  return (await r.json()).id;
}
async function firstItem(conv) {
  const r = await jsonReq('GET', `/v1/conversations/${conv}/items`);
  return (await r.json()).data[0].id;
}

// Operation ("METHOD /template") -> minimal request (prefix, query) => Response.
// A request whose answer is not 2xx fails the walk too: these are the
// operations parley claims.
const IMPLEMENTED = {
  'GET /models': (pre, q) => jsonReq('GET', `${pre}/models${q}`),
  'GET /models/{model}': (pre, q) => jsonReq('GET', `${pre}/models/org%2Ftiny${q}`),
  'POST /chat/completions': (pre, q) => jsonReq('POST', `${pre}/chat/completions${q}`,
    { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }),
  'POST /completions': (pre, q) => jsonReq('POST', `${pre}/completions${q}`, { model: MODEL, prompt: 'hi', max_tokens: 1 }),
  'POST /embeddings': (pre, q) => jsonReq('POST', `${pre}/embeddings${q}`, { model: EMBED, input: 'hi' }),
  'GET /files': (pre, q) => jsonReq('GET', `${pre}/files${q}`),
  'POST /files': async (pre, q) => {
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob(['{}\n']), 'w.jsonl');
    return fetch(`${srv.url}${pre}/files${q}`, { method: 'POST', body: form });
  },
  'GET /files/{file_id}': async (pre, q) => jsonReq('GET', `${pre}/files/${await newFile()}${q}`),
  'DELETE /files/{file_id}': async (pre, q) => jsonReq('DELETE', `${pre}/files/${await newFile()}${q}`),
  'GET /files/{file_id}/content': async (pre, q) => jsonReq('GET', `${pre}/files/${await newFile()}/content${q}`),
  'POST /uploads': (pre, q) => jsonReq('POST', `${pre}/uploads${q}`, { filename: 'u.txt', purpose: 'batch', bytes: 3, mime_type: 'text/plain' }),
  'POST /uploads/{upload_id}/parts': async (pre, q) => {
    const form = new FormData();
    form.append('data', new Blob(['abc']), 'part');
    return fetch(`${srv.url}${pre}/uploads/${await newUpload()}/parts${q}`, { method: 'POST', body: form });
  },
  'POST /uploads/{upload_id}/complete': async (pre, q) => {
    const id = await newUpload();
    const part = await addPart(id);
    return jsonReq('POST', `${pre}/uploads/${id}/complete${q}`, { part_ids: [part] });
  },
  'POST /uploads/{upload_id}/cancel': async (pre, q) => jsonReq('POST', `${pre}/uploads/${await newUpload()}/cancel${q}`),
  // Deleting is for models parley pulled (tests/api/pull covers a real
  // deletion); here an unknown id must be the OpenAI model_not_found 404.
  'DELETE /models/{model}': async (pre, q) => {
    const r = await jsonReq('DELETE', `${pre}/models/no-such-model${q}`);
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.code, 'model_not_found');
    return new Response('{}', { status: 200 });
  },
  'POST /responses': (pre, q) => jsonReq('POST', `${pre}/responses${q}`, { model: MODEL, input: 'hi', max_output_tokens: 16 }),
  'POST /responses/input_tokens': (pre, q) => jsonReq('POST', `${pre}/responses/input_tokens${q}`, { model: MODEL, input: 'hi' }),
  'GET /responses/{response_id}': async (pre, q) => jsonReq('GET', `${pre}/responses/${await newResponse()}${q}`),
  'DELETE /responses/{response_id}': async (pre, q) => jsonReq('DELETE', `${pre}/responses/${await newResponse()}${q}`),
  'POST /responses/{response_id}/cancel': async (pre, q) =>
    jsonReq('POST', `${pre}/responses/${await newResponse({ background: true })}/cancel${q}`),
  'POST /audio/speech': (pre, q) => jsonReq('POST', `${pre}/audio/speech${q}`, { model: 'tts-1', input: 'hi', voice: 'alloy' }),
  'POST /audio/transcriptions': async (pre, q) => {
    const wav = await (await jsonReq('POST', '/v1/audio/speech',
      { model: 'tts-1', input: 'hello', voice: 'alloy', response_format: 'wav' })).arrayBuffer();
    const form = new FormData();
    form.append('model', 'whisper-1');
    form.append('file', new Blob([wav]), 'hello.wav');
    return fetch(`${srv.url}${pre}/audio/transcriptions${q}`, { method: 'POST', body: form });
  },
  // Implemented; this server has no Whisper model, so the answer is the
  // 501 that names the model it needs (checked in the walk below).
  'POST /audio/translations': async (pre, q) => {
    const wav = await (await jsonReq('POST', '/v1/audio/speech',
      { model: 'tts-1', input: 'hello', voice: 'alloy', response_format: 'wav' })).arrayBuffer();
    const form = new FormData();
    form.append('model', 'whisper-1');
    form.append('file', new Blob([wav]), 'hello.wav');
    return fetch(`${srv.url}${pre}/audio/translations${q}`, { method: 'POST', body: form });
  },
  'POST /realtime/client_secrets': (pre, q) => jsonReq('POST', `${pre}/realtime/client_secrets${q}`, { session: { type: 'realtime' } }),
  'POST /realtime/sessions': (pre, q) => jsonReq('POST', `${pre}/realtime/sessions${q}`, { modalities: ['text'] }),
  'POST /realtime/transcription_sessions': (pre, q) => jsonReq('POST', `${pre}/realtime/transcription_sessions${q}`, {}),
  'GET /responses/{response_id}/input_items': async (pre, q) =>
    jsonReq('GET', `${pre}/responses/${await newResponse()}/input_items${q}`),
  'POST /conversations': (pre, q) => jsonReq('POST', `${pre}/conversations${q}`, {}),
  'GET /conversations/{conversation_id}': async (pre, q) => jsonReq('GET', `${pre}/conversations/${await newConversation()}${q}`),
  'POST /conversations/{conversation_id}': async (pre, q) =>
    jsonReq('POST', `${pre}/conversations/${await newConversation()}${q}`, { metadata: { a: 'b' } }),
  'DELETE /conversations/{conversation_id}': async (pre, q) =>
    jsonReq('DELETE', `${pre}/conversations/${await newConversation()}${q}`),
  'GET /conversations/{conversation_id}/items': async (pre, q) =>
    jsonReq('GET', `${pre}/conversations/${await newConversation()}/items${q}`),
  'POST /conversations/{conversation_id}/items': async (pre, q) =>
    jsonReq('POST', `${pre}/conversations/${await newConversation()}/items${q}`, { items: [{ role: 'user', content: 'x' }] }),
  'GET /conversations/{conversation_id}/items/{item_id}': async (pre, q) => {
    const c = await newConversation();
    return jsonReq('GET', `${pre}/conversations/${c}/items/${await firstItem(c)}${q}`);
  },
  'DELETE /conversations/{conversation_id}/items/{item_id}': async (pre, q) => {
    const c = await newConversation();
    return jsonReq('DELETE', `${pre}/conversations/${c}/items/${await firstItem(c)}${q}`);
  },
};

// "/a/{b}/c" -> "/a/b_1/c": a made-up id per parameter.
const instantiate = (tmpl) => tmpl.replace(/\{([^}]+)\}/g, (_, name) => `${name}_1`);

// Checks one answer is exactly the 501 of the operation.
async function assert501(r, op, where) {
  const text = await r.text();
  assert.equal(r.status, 501, `${where}: ${op.key} (${op.operation}) answered ${r.status}: ${text.slice(0, 300)}` +
    (r.status < 300 ? ' - it is implemented now: add it to IMPLEMENTED in surface.test.mjs with a minimal request' : ''));
  assert.equal(r.headers.get('x-should-retry'), 'false', where);
  assert.match(r.headers.get('x-request-id') ?? '', /^req_[0-9a-f]{32}$/, where);
  assert.match(r.headers.get('openai-processing-ms') ?? '', /^\d+$/, where);
  assert.match(r.headers.get('content-type') ?? '', /^application\/json/, where);
  const body = JSON.parse(text);
  assert.deepEqual(Object.keys(body), ['error'], where);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type'], where);
  assert.equal(body.error.code, 'not_implemented_local', where);
  assert.equal(body.error.param, null, where);
  assert.equal(typeof body.error.type, 'string', where);
  assert.ok(body.error.message.includes(op.operation.replace(/^beta_/, '')), `${where}: message names the operation: ${body.error.message}`);
  assert.ok(body.error.message.includes(`${op.method} /v1${op.tmpl}`), `${where}: message names the path: ${body.error.message}`);
  assert.match(body.error.message, /cloud feature with no local equivalent/, where);
}

// Sends a request that an unimplemented operation would receive.
function unimplementedReq(op, prefix) {
  const url = `${srv.url}${prefix}${instantiate(op.tmpl)}${op.query ? `?${op.query}` : ''}`;
  const init = { method: op.method, headers: { authorization: 'Bearer x' } };
  if (op.method === 'POST') { init.headers['content-type'] = 'application/json'; init.body = '{}'; }
  return fetch(url, init);
}

// Implemented operations that answer 501 when no model of the kind they need
// is present (a transcription-only speech model does not translate).
const NEEDS_WHISPER = { 'POST /audio/translations': /multilingual Whisper model/ };

// ---- the walk ---------------------------------------------------------------

test('every operation of openai-paths.tsv is implemented or answers the 501, none 404s or 500s', async (t) => {
  if (skip) return t.skip(skip);
  assert.equal(ops.length, 288, 'the spec lists 288 method+path pairs');
  const seen = { implemented: 0, unimplemented: 0 };
  for (const op of ops) {
    const q = op.query ? `?${op.query}` : '';
    if (IMPLEMENTED[op.key]) {
      const r = await IMPLEMENTED[op.key]('/v1', q);
      const text = await r.text();
      if (NEEDS_WHISPER[op.key] && r.status === 501) {
        assert.match(text, NEEDS_WHISPER[op.key], `${op.key}: a 501 that names the model it needs`);
        seen.implemented++;
        continue;
      }
      assert.ok(![404, 500, 501].includes(r.status), `${op.key} answered ${r.status}: ${text.slice(0, 300)}`);
      // Without the BERT vocabulary there is no embedding model: a clean 400 is fine then.
      if (!(op.key === 'POST /embeddings' && models.bertSkip))
        assert.ok(r.status >= 200 && r.status < 300, `${op.key} (implemented) answered ${r.status}: ${text.slice(0, 300)}`);
      seen.implemented++;
    } else {
      await assert501(await unimplementedReq(op, '/v1'), op, '/v1');
      seen.unimplemented++;
    }
  }
  // Every IMPLEMENTED key is a real operation (a typo would hide one).
  for (const k of Object.keys(IMPLEMENTED)) assert.ok(ops.some((o) => o.key === k), `IMPLEMENTED has ${k}, not in the TSV`);
  t.diagnostic(`${seen.implemented} implemented, ${seen.unimplemented} answer 501`);
});

test('the alias forms (no /v1, /v1/v1) of every unimplemented operation give the same 501', async (t) => {
  if (skip) return t.skip(skip);
  for (const op of ops) {
    if (IMPLEMENTED[op.key]) continue;
    for (const prefix of ['', '/v1/v1']) await assert501(await unimplementedReq(op, prefix), op, `prefix "${prefix}"`);
  }
});

test('the alias forms of every implemented operation succeed (raw requests)', async (t) => {
  if (skip) return t.skip(skip);
  for (const op of ops) {
    if (!IMPLEMENTED[op.key]) continue;
    for (const prefix of ['', '/v1/v1']) {
      const r = await IMPLEMENTED[op.key](prefix, op.query ? `?${op.query}` : '');
      const text = await r.text();
      if (op.key === 'POST /embeddings' && models.bertSkip) continue;
      if (NEEDS_WHISPER[op.key] && r.status === 501) {
        assert.match(text, NEEDS_WHISPER[op.key]);
        continue;
      }
      assert.ok(r.status >= 200 && r.status < 300, `${prefix}${op.tmpl}: ${op.method} answered ${r.status}: ${text.slice(0, 300)}`);
    }
  }
});

for (const [label, suffix] of [['without /v1', ''], ['with a doubled /v1/v1', '/v1/v1']]) {
  test(`the openai SDK with a base URL ${label}: models, chat, completions, embeddings, files, uploads`, async (t) => {
    if (skip) return t.skip(skip);
    const client = new OpenAI({ baseURL: srv.url + suffix, apiKey: 'anything', maxRetries: 0 });
    const list = [];
    for await (const m of client.models.list()) list.push(m.id);
    assert.ok(list.includes(MODEL), JSON.stringify(list));
    assert.equal((await client.models.retrieve(MODEL)).id, MODEL);
    await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError && e.error.code === 'model_not_found');

    const c = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    assert.equal(c.object, 'chat.completion');
    assert.match(c._request_id, /^req_/);
    const chunks = [];
    for await (const ch of await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true })) chunks.push(ch);
    assert.ok(chunks.length >= 2 && chunks.every((ch) => ch.object === 'chat.completion.chunk'));
    const tc = await client.completions.create({ model: MODEL, prompt: 'hi', max_tokens: 2 });
    assert.equal(tc.object, 'text_completion');
    if (!models.bertSkip) {
      const e = await client.embeddings.create({ model: EMBED, input: ['a', 'b'] });
      assert.equal(e.data.length, 2);
      assert.ok(e.data[0].embedding.length > 0);
    }

    const f = await client.files.create({ file: await toFile(Buffer.from('{"x":1}\n'), 'a.jsonl'), purpose: 'batch' });
    assert.equal(f.bytes, 8);
    assert.equal((await client.files.retrieve(f.id)).id, f.id);
    assert.equal(Buffer.from(await (await client.files.content(f.id)).arrayBuffer()).toString(), '{"x":1}\n');
    const listed = [];
    for await (const x of client.files.list()) listed.push(x.id);
    assert.ok(listed.includes(f.id));
    assert.equal((await client.files.delete(f.id)).deleted, true);
    const up = await client.uploads.create({ filename: 'b.txt', purpose: 'batch', bytes: 3, mime_type: 'text/plain' });
    const part = await client.uploads.parts.create(up.id, { data: await toFile(Buffer.from('xyz'), 'p') });
    const done = await client.uploads.complete(up.id, { part_ids: [part.id] });
    assert.equal(done.status, 'completed');
    assert.equal(Buffer.from(await (await client.files.content(done.file.id)).arrayBuffer()).toString(), 'xyz');

    // Responses and audio: whatever /v1 answers, the alias answers alike
    // (the 501 today; the real thing once those routes land).
    const v1 = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
    const outcome = async (p) => p.then(() => 'ok', (e) => `${e.status}:${e.error?.code ?? e.code}`);
    assert.equal(await outcome(client.responses.retrieve('resp_nope')), await outcome(v1.responses.retrieve('resp_nope')));
    assert.equal(await outcome(client.images.generate({ prompt: 'a cat' })), '501:not_implemented_local');
    const speech = (c) => c.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'hi' });
    assert.equal(await outcome(speech(client)), await outcome(speech(v1)));
  });
}

test('raw alias requests: each form of chat, completions, embeddings, models, files, uploads, responses, audio', async (t) => {
  if (skip) return t.skip(skip);
  const chat = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 };
  for (const pre of ['', '/v1', '/v1/v1']) {
    let r = await jsonReq('POST', `${pre}/chat/completions`, chat);
    assert.equal(r.status, 200, `${pre}/chat/completions`);
    assert.equal((await r.json()).object, 'chat.completion');
    r = await jsonReq('POST', `${pre}/completions`, { model: MODEL, prompt: 'x', max_tokens: 1 });
    assert.equal((await r.json()).object, 'text_completion', `${pre}/completions`);
    if (!models.bertSkip) {
      r = await jsonReq('POST', `${pre}/embeddings`, { model: EMBED, input: 'x', encoding_format: 'float' });
      assert.equal((await r.json()).object, 'list', `${pre}/embeddings`);
    }
    r = await jsonReq('GET', `${pre}/models`);
    assert.ok((await r.json()).data.some((m) => m.id === MODEL), `${pre}/models`);
    r = await jsonReq('GET', `${pre}/models/org%2Ftiny`);
    assert.equal((await r.json()).id, MODEL, `${pre}/models/{id}`);
    r = await jsonReq('GET', `${pre}/models/org/tiny`);
    assert.equal((await r.json()).id, MODEL, `${pre}/models/org/tiny`);
    r = await jsonReq('GET', `${pre}/files?limit=1`);
    assert.equal((await r.json()).object, 'list', `${pre}/files`);
    const fid = await newFile(pre);
    r = await jsonReq('GET', `${pre}/files/${fid}/content`);
    assert.equal(await r.text(), '{"a":1}\n', `${pre}/files/{id}/content`);
    const uid = await newUpload(pre);
    const pid = await addPart(uid, pre);
    r = await jsonReq('POST', `${pre}/uploads/${uid}/complete`, { part_ids: [pid] });
    assert.equal((await r.json()).status, 'completed', `${pre}/uploads/{id}/complete`);
    // Same answer as the /v1 form, whatever it is (501 until implemented).
    const rid = await newResponse();
    for (const [m, p, body] of [['POST', '/responses', { model: MODEL, input: 'hi', max_output_tokens: 16 }],
      ['GET', `/responses/${rid}/input_items`, undefined], ['POST', '/audio/speech', { model: 'tts', input: 'hi', voice: 'alloy' }],
      ['POST', '/conversations', {}]]) {
      const a = await jsonReq(m, `${pre}${p}`, body);
      const b = await jsonReq(m, `/v1${p}`, body);
      assert.equal(a.status, b.status, `${m} ${pre}${p}`);
      assert.notEqual(a.status, 404, `${m} ${pre}${p}`);
      await a.arrayBuffer(); await b.arrayBuffer();
    }
  }
  // A wrong method through an alias is the aliased route's 405.
  const r = await fetch(`${srv.url}/chat/completions`, { method: 'PUT' });
  assert.equal(r.status, 405);
  assert.match(r.headers.get('allow'), /POST/);
});

test('aliases leave other paths alone: Ollama /api, the root, /health, unknown paths', async (t) => {
  if (skip) return t.skip(skip);
  let r = await fetch(`${srv.url}/`);
  assert.equal(await r.text(), 'Ollama is running');
  r = await fetch(`${srv.url}/health`);
  assert.equal(r.status, 200);
  await r.arrayBuffer();
  r = await fetch(`${srv.url}/api/nope`);
  assert.equal(r.status, 404);
  assert.equal(await r.text(), '404 page not found');
  for (const p of ['/nope', '/v1/nope', '/v1/v1/nope', '/v1/v1/v1/models', '/modelsx', '/chat']) {
    r = await fetch(srv.url + p);
    assert.equal(r.status, 404, p);
    const body = await r.json();
    assert.equal(body.error.message, `Invalid URL (GET ${p})`, p);
    assert.equal(body.error.code, null, p);
  }
});

test('an Anthropic client (anthropic-version) on an unimplemented /v1 path gets the 501 in its own shape', async (t) => {
  if (skip) return t.skip(skip);
  const r = await fetch(`${srv.url}/v1/batches`, { headers: { 'anthropic-version': '2023-06-01', 'x-api-key': 'k' } });
  assert.equal(r.status, 501);
  assert.equal(r.headers.get('x-should-retry'), 'false');
  const body = await r.json();
  assert.equal(body.type, 'error');
  assert.equal(body.error.type, 'api_error');
  assert.match(body.error.message, /listBatches \(GET \/v1\/batches\)/);
  assert.match(body.request_id, /^req_/);
});
