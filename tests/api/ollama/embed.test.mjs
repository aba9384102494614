// embed.test.mjs - POST /api/embed and the legacy POST /api/embeddings
// through the official `ollama` client, on a random-weight bert: vector
// counts, unit length, dimensions, truncation, empty input, and the error
// paths of the spec's conformance list.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, teardown, post, MODEL, EMBED } from './setup.mjs';

let ctx;
const skipped = (t) => {
  if (ctx.skip || ctx.bertSkip) { t.skip(ctx.skip || ctx.bertSkip); return true; }
  return false;
};
before(async () => { ctx = await setup({ bert: true }); });
after(async () => { await teardown(ctx); });

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('embed: a string gives one vector, an array two; each has unit length; metrics present', async (t) => {
  if (skipped(t)) return;
  const one = await ctx.client.embed({ model: EMBED, input: 'hello world' });
  assert.equal(one.model, EMBED);
  assert.equal(one.embeddings.length, 1);
  assert.ok(Math.abs(norm(one.embeddings[0]) - 1) < 1e-4);
  const two = await ctx.client.embed({ model: EMBED, input: ['first text', 'second text'] });
  assert.equal(two.embeddings.length, 2);
  for (const v of two.embeddings) assert.ok(Math.abs(norm(v) - 1) < 1e-4);
  assert.equal(two.embeddings[0].length, one.embeddings[0].length);
  assert.ok(two.prompt_eval_count > one.prompt_eval_count);
  assert.ok(two.total_duration > 0 && two.load_duration > 0);
});

test('embed: dimensions keeps the first d components, renormalised', async (t) => {
  if (skipped(t)) return;
  const full = (await ctx.client.embed({ model: EMBED, input: 'abc' })).embeddings[0];
  const r = await ctx.client.embed({ model: EMBED, input: 'abc', dimensions: 8 });
  assert.equal(r.embeddings[0].length, 8);
  assert.ok(Math.abs(norm(r.embeddings[0]) - 1) < 1e-4);
  const k = norm(full.slice(0, 8));
  for (let i = 0; i < 8; i++) assert.ok(Math.abs(r.embeddings[0][i] - full[i] / k) < 1e-4);
});

test('embed: empty input loads and answers no vectors', async (t) => {
  if (skipped(t)) return;
  for (const input of ['', []]) {
    const r = await ctx.client.embed({ model: EMBED, input });
    assert.deepEqual(r.embeddings, []);
  }
});

test('embed: over-long input is cut with truncate (default), 400 with truncate:false', async (t) => {
  if (skipped(t)) return;
  const long = 'word '.repeat(400);
  const r = await ctx.client.embed({ model: EMBED, input: long });
  assert.equal(r.embeddings.length, 1);
  await assert.rejects(ctx.client.embed({ model: EMBED, input: long, truncate: false }), (e) => {
    assert.equal(e.status_code, 400);
    assert.equal(e.error, 'the input length exceeds the context length');
    return true;
  });
});

test('embed errors: invalid input type, unknown model message, model required, generative model', async (t) => {
  if (skipped(t)) return;
  const cases = [
    [{ model: EMBED, input: [1] }, 400, 'invalid input type'],
    [{ model: EMBED, input: 5 }, 400, 'invalid input type'],
    [{ model: 'nope', input: 'x' }, 404, 'model "nope" not found, try pulling it first'],
    [{ input: 'x' }, 400, 'model is required'],
    [{ model: MODEL, input: 'x' }, 400, null],
    ['', 400, 'missing request body'],
  ];
  for (const [body, status, msg] of cases) {
    const r = await post(ctx.srv, '/api/embed', body);
    assert.equal(r.status, status, `${JSON.stringify(body)} -> ${r.text}`);
    if (msg) assert.equal(r.json().error, msg);
  }
});

test('embeddings (legacy): one embedding array; empty prompt gives []; model required', async (t) => {
  if (skipped(t)) return;
  const r = await ctx.client.embeddings({ model: EMBED, prompt: 'hello' });
  assert.ok(Array.isArray(r.embedding) && r.embedding.length > 8);
  assert.ok(r.embedding.every((x) => typeof x === 'number'));
  const e = await ctx.client.embeddings({ model: EMBED, prompt: '' });
  assert.deepEqual(e.embedding, []);
  const m = await post(ctx.srv, '/api/embeddings', { prompt: 'x' });
  assert.equal(m.status, 400);
  assert.equal(m.json().error, 'model is required');
});
