// generate.test.mjs - POST /api/generate through the official `ollama`
// client and raw NDJSON: streamed and single answers, the done record and
// its timings, num_predict / stop / raw / context / template / suffix,
// load and unload forms, format (json and a closed schema), think, and every
// error path of the spec's conformance list for generate.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, teardown, post, ndjson, checkDone, MODEL } from './setup.mjs';

let ctx;
const skipped = (t) => { if (ctx.skip) { t.skip(ctx.skip); return true; } return false; };
before(async () => { ctx = await setup(); });
after(async () => { await teardown(ctx); });

test('stream: deltas with done:false, then one done record with timings and context', async (t) => {
  if (skipped(t)) return;
  const stream = await ctx.client.generate({ model: MODEL, prompt: 'Hello', stream: true, options: { num_predict: 6, temperature: 0 } });
  const recs = [];
  for await (const r of stream) recs.push(r);
  assert.ok(recs.length >= 2);
  for (const r of recs.slice(0, -1)) {
    assert.equal(r.done, false);
    assert.equal(r.model, MODEL);
    assert.equal(typeof r.response, 'string');
  }
  const last = recs.at(-1);
  checkDone(last, { generate: true });
  assert.equal(last.done_reason, 'length');
  assert.ok(last.eval_count <= 6);
});

test('stream framing: application/x-ndjson, one object per line; stream absent or null means streaming', async (t) => {
  if (skipped(t)) return;
  for (const extra of [{}, { stream: null }]) {
    const r = await post(ctx.srv, '/api/generate', { model: MODEL, prompt: 'Hi', options: { num_predict: 3 }, ...extra });
    assert.equal(r.status, 200);
    assert.match(r.type, /application\/x-ndjson/);
    const recs = ndjson(r.text);
    assert.ok(recs.slice(0, -1).every((x) => x.done === false));
    checkDone(recs.at(-1), { generate: true });
  }
});

test('stream:false: one object whose response equals the streamed concatenation (fixed seed, temperature 0)', async (t) => {
  if (skipped(t)) return;
  const req = { model: MODEL, prompt: 'Tell me', options: { num_predict: 8, temperature: 0, seed: 42 } };
  const one = await ctx.client.generate({ ...req, stream: false });
  checkDone(one, { generate: true });
  let text = '';
  for await (const r of await ctx.client.generate({ ...req, stream: true })) text += r.response;
  assert.equal(one.response, text);
  assert.equal(one.eval_count, 8);
});

test('options.stop ends the answer with done_reason stop and without the stop text', async (t) => {
  if (skipped(t)) return;
  const base = { model: MODEL, prompt: 'x', stream: false, options: { num_predict: 12, temperature: 0, seed: 1 } };
  const free = await ctx.client.generate(base);
  assert.ok(free.response.length > 2);
  const stop = free.response.slice(2, 4).trim() || free.response.slice(2, 3);
  const r = await ctx.client.generate({ ...base, options: { ...base.options, stop: [stop] } });
  assert.equal(r.done_reason, 'stop');
  assert.ok(!r.response.includes(stop), `${JSON.stringify(r.response)} holds ${JSON.stringify(stop)}`);
});

test('raw has no context; raw with system/template/context is 400 with the exact message', async (t) => {
  if (skipped(t)) return;
  const r = await ctx.client.generate({ model: MODEL, prompt: 'abc', raw: true, stream: false, options: { num_predict: 2 } });
  assert.equal(r.context, undefined);
  for (const extra of [{ system: 's' }, { template: '{{ .Prompt }}' }, { context: [1, 2] }]) {
    await assert.rejects(ctx.client.generate({ model: MODEL, prompt: 'a', raw: true, ...extra }), (e) => {
      assert.equal(e.status_code, 400);
      assert.equal(e.error, 'raw mode does not support template, system, or context');
      return true;
    });
  }
});

test('context from a previous answer is accepted and counted in the next prompt', async (t) => {
  if (skipped(t)) return;
  const a = await ctx.client.generate({ model: MODEL, prompt: 'one', stream: false, options: { num_predict: 3 } });
  const b = await ctx.client.generate({ model: MODEL, prompt: 'two', context: a.context, stream: false, options: { num_predict: 3 } });
  checkDone(b, { generate: true });
  assert.ok(b.prompt_eval_count > a.prompt_eval_count);
  const bad = await post(ctx.srv, '/api/generate', { model: MODEL, prompt: 'x', context: [99999999], stream: false });
  assert.equal(bad.status, 400);
});

test('template override (Go template subset) renders .System and .Prompt; an unsupported action or a malformed template is 400', async (t) => {
  if (skipped(t)) return;
  const r = await ctx.client.generate({
    model: MODEL, prompt: 'Help me write tests.', system: 'You can perform magic tricks.',
    template: '{{ if .System }}{{ .System }} {{ end }}### USER {{ .Prompt }} ', stream: false, options: { num_predict: 2 },
  });
  checkDone(r, { generate: true });
  const dbg = (await post(ctx.srv, '/api/generate', {
    model: MODEL, prompt: 'Help me write tests.', system: 'You can perform magic tricks.',
    template: '{{ if .System }}{{ .System }} {{ end }}### USER {{ .Prompt }} ', _debug_render_only: true,
  })).json();
  assert.ok(dbg._debug_info.rendered_template.endsWith('You can perform magic tricks. ### USER Help me write tests. '),
    JSON.stringify(dbg._debug_info));
  const rawDbg = (await post(ctx.srv, '/api/generate', { model: MODEL, prompt: 'verbatim text', raw: true, _debug_render_only: true })).json();
  assert.ok(rawDbg._debug_info.rendered_template.endsWith('verbatim text'));
  const bad = await post(ctx.srv, '/api/generate', { model: MODEL, prompt: 'x', template: '{{ range .Messages }}{{ end }}', stream: false });
  assert.equal(bad.status, 400);
  assert.match(bad.json().error, /unsupported action/);
  const open = await post(ctx.srv, '/api/generate', { model: MODEL, prompt: 'x', template: '{{ if .System }}never closed', stream: false });
  assert.equal(open.status, 400, open.text);
  assert.ok(typeof open.json().error === 'string' && open.json().error.length > 0);
});

test('suffix on a model without insert is 400 naming the full model name', async (t) => {
  if (skipped(t)) return;
  await assert.rejects(ctx.client.generate({ model: MODEL, prompt: 'a', suffix: 'b' }), (e) => {
    assert.equal(e.status_code, 400);
    assert.equal(e.error, 'registry.ollama.ai/org/tiny:latest does not support insert');
    return true;
  });
});

test('empty prompt loads (done_reason load, single JSON object); keep_alive 0 answers unload', async (t) => {
  if (skipped(t)) return;
  const r = await post(ctx.srv, '/api/generate', { model: MODEL });
  assert.equal(r.status, 200);
  assert.match(r.type, /application\/json/);
  const body = r.json();
  assert.deepEqual([body.done, body.done_reason, body.response, body.model], [true, 'load', '', MODEL]);
  const u = (await post(ctx.srv, '/api/generate', { model: MODEL, keep_alive: 0 })).json();
  assert.deepEqual([u.done, u.done_reason, u.response], [true, 'unload', '']);
});

test('format "json" gives a JSON object; a closed schema gives a matching document at any seed', async (t) => {
  if (skipped(t)) return;
  const j = await ctx.client.generate({ model: MODEL, prompt: 'json please', format: 'json', stream: false, options: { num_predict: 40, temperature: 0 } });
  assert.match(j.response.trimStart(), /^\{/);
  if (j.done_reason === 'stop') assert.equal(typeof JSON.parse(j.response), 'object');
  const schema = {
    type: 'object',
    properties: { color: { type: 'string', enum: ['red', 'green', 'blue'] }, ok: { type: 'boolean' } },
    required: ['color', 'ok'], additionalProperties: false,
  };
  for (const seed of [1, 2, 3]) {
    const r = await ctx.client.generate({ model: MODEL, prompt: 'Pick', format: schema, stream: false, options: { num_predict: 120, temperature: 1, seed } });
    assert.equal(r.done_reason, 'stop');
    const doc = JSON.parse(r.response);
    assert.deepEqual(Object.keys(doc).sort(), ['color', 'ok']);
    assert.ok(['red', 'green', 'blue'].includes(doc.color));
  }
  for (const f of ['', null]) {
    const r = await ctx.client.generate({ model: MODEL, prompt: 'x', format: f, stream: false, options: { num_predict: 2 } });
    assert.equal(r.done, true);
  }
  await assert.rejects(ctx.client.generate({ model: MODEL, prompt: 'x', format: 'xml' }), (e) => {
    assert.ok(e.status_code >= 400);
    assert.match(e.error, /invalid format/);
    return true;
  });
});

test('think: true on a non-thinking model is 400, false is fine, a bad value is 400', async (t) => {
  if (skipped(t)) return;
  await assert.rejects(ctx.client.generate({ model: MODEL, prompt: 'x', think: true }), (e) => {
    assert.equal(e.status_code, 400);
    assert.equal(e.error, `"${MODEL}" does not support thinking`);
    return true;
  });
  const ok = await ctx.client.generate({ model: MODEL, prompt: 'x', think: false, stream: false, options: { num_predict: 2 } });
  assert.equal(ok.thinking, undefined);
  const bad = await post(ctx.srv, '/api/generate', { model: MODEL, prompt: 'x', think: 'bogus' });
  assert.equal(bad.status, 400);
  assert.match(bad.json().error, /invalid think value/);
});

test('error paths: empty/unknown/invalid model, empty and bad bodies, top_logprobs, options and keep_alive types', async (t) => {
  if (skipped(t)) return;
  const cases = [
    [{ model: '' }, 404, "model '' not found"],
    [{ model: 'nope', prompt: 'x' }, 404, "model 'nope' not found"],
    [{ model: 'a/b/c/d/e', prompt: 'x' }, 400, 'invalid model name'],
    ['', 400, 'missing request body'],
    ['{"model":', 400, null],
    [{ model: 'nope', top_logprobs: 21 }, 400, 'top_logprobs must be between 0 and 20'],
    [{ model: MODEL, top_logprobs: -1 }, 400, 'top_logprobs must be between 0 and 20'],
    [{ model: MODEL, prompt: 'x', options: { temperature: 'hot' } }, 400, 'option "temperature" must be of type float32'],
    [{ model: MODEL, prompt: 'x', options: { num_ctx: -1 } }, 400, 'option "num_ctx": -1 is out of range (expected 1 to 1e+09)'],
    [{ model: MODEL, prompt: 'x', options: { num_predict: -3 } }, 400, 'option "num_predict": -3 is out of range (expected -2 to 1e+12)'],
    [{ model: MODEL, prompt: 'x', system: 5 }, 400, null],
    [{ model: MODEL, prompt: 'x', images: 'abc' }, 400, null],
    [{ model: MODEL, prompt: 'x', keep_alive: true }, 400, null],
    [{ model: MODEL, prompt: 'x', images: ['not base64!'] }, 400, null],
    // refused by the sampler before the stream opens: a status and one JSON object, not NDJSON
    [{ model: MODEL, prompt: 'x', options: { min_p: 5 } }, 400, null],
    [{ model: MODEL, prompt: 'x'.repeat(6000) }, 400, null],
  ];
  for (const [body, status, msg] of cases) {
    const r = await post(ctx.srv, '/api/generate', body);
    assert.equal(r.status, status, `${JSON.stringify(body)} -> ${r.text}`);
    assert.match(r.type, /application\/json/);
    const e = r.json();
    assert.equal(typeof e.error, 'string');
    if (msg) assert.equal(e.error, msg);
  }
  // unknown options are ignored; keep_alive spellings are accepted
  for (const ka of ['10m', 600, 42.5, -1, '-1m']) {
    const r = await post(ctx.srv, '/api/generate', { model: MODEL, prompt: 'x', stream: false, keep_alive: ka, options: { num_predict: 1, bogus_key: 1, mirostat: 0 } });
    assert.equal(r.status, 200, `keep_alive ${ka}: ${r.text}`);
  }
});

test('model names: case-insensitive, without a tag, echoed as given', async (t) => {
  if (skipped(t)) return;
  const r = await ctx.client.generate({ model: 'ORG/Tiny', prompt: 'x', stream: false, options: { num_predict: 1 } });
  assert.equal(r.model, 'ORG/Tiny');
});

test('logprobs: each record carries token, logprob, bytes and the top alternatives', async (t) => {
  if (skipped(t)) return;
  const r = (await post(ctx.srv, '/api/generate', { model: MODEL, prompt: 'x', stream: false, logprobs: true, top_logprobs: 2, options: { num_predict: 3 } })).json();
  assert.equal(r.logprobs.length, 3);
  for (const lp of r.logprobs) {
    assert.equal(typeof lp.token, 'string');
    assert.equal(typeof lp.logprob, 'number');
    assert.ok(Array.isArray(lp.bytes));
    assert.equal(lp.top_logprobs.length, 2);
  }
});
