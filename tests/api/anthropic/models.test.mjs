// models.test.mjs - GET /v1/models[/{id}] in the Anthropic shape through the
// official @anthropic-ai/sdk, and the dual-vendor routing of the shared path
// (spec ../shared/specs/anthropic.md section 4, checks 26, 27, 29).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { setup } from './setup.mjs';

let env, client, skip;

before(async () => {
  env = await setup({ args: ['--alias', 'tiny=org/tiny'] });
  if (env.skip) { skip = env.skip; return; }
  client = new Anthropic({ baseURL: env.srv.url, apiKey: 'anything', maxRetries: 0 });
});
after(async () => { if (env?.teardown) await env.teardown(); });

const get = (p, headers = { 'anthropic-version': '2023-06-01' }) => fetch(env.srv.url + p, { headers });

test('26. models.list: ModelInfo fields; auto-pagination with limit 1 visits every model once', async (t) => {
  if (skip) return t.skip(skip);
  const all = [];
  for await (const m of client.models.list()) all.push(m);
  assert.ok(all.length >= 2, JSON.stringify(all));
  for (const m of all) {
    assert.equal(m.type, 'model');
    assert.equal(typeof m.id, 'string');
    assert.equal(typeof m.display_name, 'string');
    assert.match(m.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(!Number.isNaN(Date.parse(m.created_at)));
    assert.ok(m.max_input_tokens === null || Number.isInteger(m.max_input_tokens));
  }
  const ids = all.map((m) => m.id);
  assert.ok(ids.includes('org/tiny') && ids.includes('org/think'));
  // newest first
  for (let i = 1; i < all.length; i++) assert.ok(Date.parse(all[i - 1].created_at) >= Date.parse(all[i].created_at));
  const paged = [];
  let pages = 0;
  for await (const m of client.models.list({ limit: 1 })) { paged.push(m.id); pages++; }
  assert.deepEqual(paged, ids);
  assert.equal(pages, ids.length);
  // the page fields
  const first = await (await get('/v1/models?limit=1')).json();
  assert.equal(first.data.length, 1);
  assert.equal(first.has_more, true);
  assert.equal(first.first_id, ids[0]);
  assert.equal(first.last_id, ids[0]);
  const rest = await (await get(`/v1/models?after_id=${encodeURIComponent(ids[0])}`)).json();
  assert.deepEqual(rest.data.map((m) => m.id), ids.slice(1));
  assert.equal(rest.has_more, false);
  const back = await (await get(`/v1/models?before_id=${encodeURIComponent(ids.at(-1))}&limit=1`)).json();
  assert.deepEqual(back.data.map((m) => m.id), [ids.at(-2)]);
  assert.equal(back.has_more, ids.length > 2);
  const none = await (await get(`/v1/models?after_id=${encodeURIComponent(ids.at(-1))}`)).json();
  assert.deepEqual(none, { data: [], has_more: false, first_id: null, last_id: null });
});

test('26b. models.list: bad limit and unknown cursors are 400 invalid_request_error', async (t) => {
  if (skip) return t.skip(skip);
  for (const q of ['limit=0', 'limit=1001', 'limit=x', 'after_id=nope', 'before_id=nope', 'after_id=org%2Ftiny&before_id=org%2Fthink']) {
    const r = await get(`/v1/models?${q}`);
    assert.equal(r.status, 400, q);
    const b = await r.json();
    assert.equal(b.type, 'error');
    assert.equal(b.error.type, 'invalid_request_error');
  }
  await assert.rejects(client.models.list({ limit: 0 }), (e) => e instanceof Anthropic.BadRequestError);
});

test('27. models.retrieve returns the id asked for (an alias too); unknown ids are NotFoundError', async (t) => {
  if (skip) return t.skip(skip);
  const m = await client.models.retrieve('org/think');
  assert.equal(m.id, 'org/think');
  assert.equal(m.type, 'model');
  assert.equal(m.capabilities.thinking.supported, true);
  assert.equal(m.capabilities.image_input.supported, false);
  assert.equal((await client.models.retrieve('tiny')).id, 'tiny');
  assert.equal((await client.models.retrieve('org/tiny')).capabilities.thinking.supported, false);
  await assert.rejects(client.models.retrieve('claude-opus-4'), (e) => {
    assert.ok(e instanceof Anthropic.NotFoundError);
    assert.equal(e.type, 'not_found_error');
    assert.match(e.error.error.message, /claude-opus-4/);
    assert.match(e.requestID, /^req_/);
    return true;
  });
});

test('29. one path, two vendors: anthropic-version selects the Anthropic shape', async (t) => {
  if (skip) return t.skip(skip);
  const a = await get('/v1/models');
  assert.match(a.headers.get('request-id'), /^req_/);
  const ab = await a.json();
  assert.ok(Array.isArray(ab.data) && 'has_more' in ab && !('object' in ab));
  const o = await get('/v1/models', {});
  const ob = await o.json();
  assert.equal(ob.object, 'list');
  assert.equal(ob.data[0].object, 'model');
  const oa = new OpenAI({ baseURL: `${env.srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  assert.equal((await oa.models.retrieve('org/tiny')).object, 'model');
  const one = await (await get('/v1/models/org%2Ftiny')).json();
  assert.equal(one.type, 'model');
  assert.ok(!('object' in one));
});
