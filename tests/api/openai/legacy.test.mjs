// legacy.test.mjs - POST /v1/completions beyond a single string prompt
// (several prompts, token-id prompts, suffix / fill-in-the-middle, best_of)
// and POST /v1/embeddings with token-id inputs, through the official
// `openai` SDK (spec ../shared/specs/openai.md section 3.1-3.2, issue 6
// items 2-3). The models are random-weight: the tests assert shapes,
// indexes, usage sums and errors, never the generated text.
//
// Models: the llama SPM test model (no FIM tokens), a llama model carrying
// the StarCoder vocabulary (<fim_prefix>/<fim_suffix>/<fim_middle>), and
// the bert embedding model. Without ../shared the FIM model carries the
// project's own vocabulary with StarCoder's FIM tokens (gen-vocab fim).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, runCli } from '../lib/server.mjs';
import { makeModelsDir, SHARED, FIM_VOCAB } from '../lib/models.mjs';

const MODEL = 'org/tiny';
const FIM = 'fim';
const STARCODER_VOCAB = existsSync(path.join(SHARED, 'vocab/ggml-vocab-starcoder.gguf'))
  ? path.join(SHARED, 'vocab/ggml-vocab-starcoder.gguf') : FIM_VOCAB;
let srv, client, models, skip, fimSkip;

before(async () => {
  models = await makeModelsDir({ bert: true });
  if (models.skip) { skip = models.skip; return; }
  const r = await runCli(['gen-model', path.join(models.dir, 'fim.gguf'), '--vocab', STARCODER_VOCAB, '--ctx', '512']);
  if (r.code !== 0) fimSkip = `gen-model (FIM vocabulary) failed: ${r.stderr.trim()}`;
  srv = await startServer({
    args: ['--models-dir', models.dir, '--default-model', MODEL, '--parallel', '4'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const cmpl = (extra = {}) => ({ model: MODEL, prompt: 'Hello', max_tokens: 4, temperature: 0, ...extra });

// Token ids of text as the server tokenizes it (the CLI shares the tokenizer).
async function tokenize(file, text, extra = []) {
  const r = await runCli(['tokenize', path.join(models.dir, file), text, '--json', ...extra]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout).ids;
}

// Asserts a rejected call is a 400 naming param (and, optionally, matching msg).
async function rejects400(p, param, msg) {
  await assert.rejects(p, (e) => {
    assert.equal(e.status, 400, `status ${e.status}: ${e.message}`);
    assert.equal(e.param, param, `param of: ${e.message}`);
    if (msg) assert.match(e.message, msg);
    return true;
  });
}

function checkUsage(c) {
  assert.ok(c.usage.prompt_tokens > 0);
  assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
}

test('several string prompts: one set of n choices per prompt, indexed prompt*n + i, usage summed', async (t) => {
  if (skip) return t.skip(skip);
  const prompts = ['Hello', 'Once upon a time there was', 'The'];
  const singles = [];
  for (const p of prompts) singles.push(await client.completions.create(cmpl({ prompt: p })));
  const c = await client.completions.create(cmpl({ prompt: prompts, n: 2 }));
  assert.equal(c.object, 'text_completion');
  assert.match(c.id, /^cmpl-/);
  assert.equal(c.choices.length, prompts.length * 2);
  assert.deepEqual(c.choices.map((x) => x.index), [0, 1, 2, 3, 4, 5]);
  for (const x of c.choices) assert.ok(['stop', 'length'].includes(x.finish_reason));
  // prompt tokens add up over the prompts (each counted once, not per choice)
  const sum = singles.reduce((a, s) => a + s.usage.prompt_tokens, 0);
  assert.equal(c.usage.prompt_tokens, sum);
  checkUsage(c);
  // greedy: every choice of prompt p is what prompt p alone gives
  for (let p = 0; p < prompts.length; p++)
    for (let i = 0; i < 2; i++) assert.equal(c.choices[p * 2 + i].text, singles[p].choices[0].text, `prompt ${p}`);
});

test('token-id prompts (int[] and int[][]) equal their text prompts', async (t) => {
  if (skip) return t.skip(skip);
  const ids = await tokenize('org/tiny.gguf', 'Hello world');
  const byText = await client.completions.create(cmpl({ prompt: 'Hello world' }));
  const one = await client.completions.create(cmpl({ prompt: ids }));
  assert.equal(one.choices.length, 1);
  assert.equal(one.usage.prompt_tokens, byText.usage.prompt_tokens);
  assert.equal(one.choices[0].text, byText.choices[0].text);
  const two = await client.completions.create(cmpl({ prompt: [ids, ids.slice(0, 2)], echo: true }));
  assert.deepEqual(two.choices.map((x) => x.index), [0, 1]);
  assert.equal(two.usage.prompt_tokens, ids.length + 2);
  assert.ok(two.choices[0].text.startsWith('Hello world'), two.choices[0].text); // echo decodes the ids
  checkUsage(two);
});

test('several prompts streamed: chunks interleave with the right indexes, usage chunk, [DONE]', async (t) => {
  if (skip) return t.skip(skip);
  const prompts = ['Hello', 'A long time ago'];
  const full = await client.completions.create(cmpl({ prompt: prompts, n: 2, max_tokens: 6 }));
  const stream = await client.completions.create(cmpl({
    prompt: prompts, n: 2, max_tokens: 6, stream: true, stream_options: { include_usage: true },
  }));
  const text = {}, finish = {};
  let usage = null, ids = new Set();
  for await (const ch of stream) {
    ids.add(ch.id);
    if (ch.usage) { usage = ch.usage; assert.equal(ch.choices.length, 0); continue; }
    for (const x of ch.choices) {
      assert.ok(x.index >= 0 && x.index < 4, `index ${x.index}`);
      text[x.index] = (text[x.index] ?? '') + x.text;
      if (x.finish_reason) { assert.equal(finish[x.index], undefined, 'one finish per choice'); finish[x.index] = x.finish_reason; }
    }
  }
  assert.equal(ids.size, 1, 'one id for the whole stream');
  assert.deepEqual(Object.keys(finish).map(Number).sort(), [0, 1, 2, 3]);
  for (let i = 0; i < 4; i++) assert.equal(text[i], full.choices[i].text, `choice ${i}`);
  assert.ok(usage);
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
  assert.equal(usage.completion_tokens, full.usage.completion_tokens);
});

test('best_of: equal to n is accepted; above n returns n choices ranked by total logprob', async (t) => {
  if (skip) return t.skip(skip);
  const same = await client.completions.create(cmpl({ n: 2, best_of: 2 }));
  assert.equal(same.choices.length, 2);
  const c = await client.completions.create(cmpl({
    prompt: ['Hello', 'The'], n: 1, best_of: 3, temperature: 1, seed: 11, logprobs: 0, max_tokens: 5,
  }));
  assert.deepEqual(c.choices.map((x) => x.index), [0, 1]);
  for (const x of c.choices) {
    assert.ok(x.logprobs, 'asked logprobs are kept');
    assert.equal(x.logprobs.tokens.length, x.logprobs.token_logprobs.length);
  }
  // the completions of all best_of candidates are counted
  assert.ok(c.usage.completion_tokens >= c.choices.reduce((a, x) => a + x.logprobs.tokens.length, 0));
  // ranking: with n = 2 of best_of = 3 the first answered has the higher total
  const r = await client.completions.create(cmpl({ n: 2, best_of: 3, temperature: 1, seed: 5, logprobs: 0, max_tokens: 5 }));
  const total = (x) => x.logprobs.token_logprobs.reduce((a, b) => a + b, 0);
  assert.equal(r.choices.length, 2);
  assert.ok(total(r.choices[0]) >= total(r.choices[1]), 'best first');
  await rejects400(client.completions.create(cmpl({ n: 2, best_of: 1 })), 'best_of');
  await rejects400(client.completions.create(cmpl({ n: 1, best_of: 2, stream: true })), 'best_of', /stream/);
  await rejects400(client.completions.create(cmpl({ best_of: 99 })), 'best_of');
});

test('suffix: a model without FIM tokens is a 400 naming suffix', async (t) => {
  if (skip) return t.skip(skip);
  await rejects400(client.completions.create(cmpl({ suffix: ' return x' })), 'suffix', /fill-in-the-middle/);
  // an empty suffix inserts nothing: a plain completion
  const c = await client.completions.create(cmpl({ suffix: '' }));
  assert.equal(c.choices.length, 1);
});

test('suffix: a vocabulary with FIM tokens builds the prefix/suffix/middle prompt', async (t) => {
  if (skip) return t.skip(skip);
  if (fimSkip) return t.skip(fimSkip);
  const plain = await client.completions.create({ model: FIM, prompt: 'def add(a, b):', max_tokens: 3, temperature: 0 });
  const fim = await client.completions.create({
    model: FIM, prompt: 'def add(a, b):', suffix: '\n    return c', max_tokens: 3, temperature: 0,
  });
  const suffixIds = await tokenize('fim.gguf', '\n    return c', ['--no-bos']);
  // the FIM prompt is the plain one plus <fim_prefix>, <fim_suffix>, the suffix and <fim_middle>
  assert.equal(fim.usage.prompt_tokens, plain.usage.prompt_tokens + 3 + suffixIds.length);
  assert.equal(fim.choices.length, 1);
  checkUsage(fim);
  const s = await client.completions.create({
    model: FIM, prompt: ['a', 'b'], suffix: 'c', max_tokens: 2, temperature: 0, stream: true,
  });
  const seen = new Set();
  for await (const ch of s) for (const x of ch.choices) seen.add(x.index);
  assert.deepEqual([...seen].sort(), [0, 1]);
});

test('completion prompt errors name the field', async (t) => {
  if (skip) return t.skip(skip);
  await rejects400(client.completions.create(cmpl({ prompt: [1, 2, 99999999] })), 'prompt[2]', /vocabulary/);
  await rejects400(client.completions.create(cmpl({ prompt: [[1, 2], [1, -3]] })), 'prompt[1][1]', /vocabulary/);
  await rejects400(client.completions.create(cmpl({ prompt: [[1, 2], []] })), 'prompt[1]');
  await rejects400(client.completions.create(cmpl({ prompt: ['a', 3] })), 'prompt[1]');
  await rejects400(client.completions.create(cmpl({ prompt: [] })), 'prompt');
  await rejects400(client.completions.create(cmpl({ prompt: { a: 1 } })), 'prompt');
  await rejects400(client.completions.create(cmpl({ prompt: Array(40).fill('x') })), 'prompt', /at most/);
  await rejects400(client.completions.create(cmpl({ prompt: ['ok', 'x '.repeat(3000)] })), 'prompt[1]', /context/);
});

test('embeddings: token arrays embed like the same text; several inputs keep their order', async (t) => {
  if (skip) return t.skip(skip);
  if (models.bertSkip) return t.skip(models.bertSkip);
  const model = 'embed';
  const texts = ['hello world', 'a quite different sentence'];
  const ids = [];
  for (const s of texts) ids.push(await tokenize('embed.gguf', s));
  const byText = await client.embeddings.create({ model, input: texts, encoding_format: 'float' });
  const byIds = await client.embeddings.create({ model, input: ids, encoding_format: 'float' });
  const one = await client.embeddings.create({ model, input: ids[0] }); // int[]: base64 via the SDK
  assert.equal(byIds.data.length, 2);
  assert.deepEqual(byIds.data.map((d) => d.index), [0, 1]);
  for (let i = 0; i < 2; i++)
    for (let k = 0; k < byText.data[i].embedding.length; k++)
      assert.ok(Math.abs(byText.data[i].embedding[k] - byIds.data[i].embedding[k]) < 1e-5, `input ${i} dim ${k}`);
  assert.equal(one.data.length, 1);
  for (let k = 0; k < one.data[0].embedding.length; k++)
    assert.ok(Math.abs(one.data[0].embedding[k] - byText.data[0].embedding[k]) < 1e-5);
  assert.equal(byIds.usage.prompt_tokens, ids[0].length + ids[1].length);
  assert.equal(byIds.usage.prompt_tokens, byText.usage.prompt_tokens);
  // the two inputs differ (not one vector repeated)
  assert.ok(byIds.data[0].embedding.some((v, k) => Math.abs(v - byIds.data[1].embedding[k]) > 1e-4));
});

test('embeddings: errors name input[i] (vocabulary, context with both numbers, shape)', async (t) => {
  if (skip) return t.skip(skip);
  if (models.bertSkip) return t.skip(models.bertSkip);
  const model = 'embed';
  await rejects400(client.embeddings.create({ model, input: [101, 99999999, 102] }), 'input[1]', /vocabulary/);
  await rejects400(client.embeddings.create({ model, input: [[101, 102], [101, -1]] }), 'input[1][1]');
  await rejects400(client.embeddings.create({ model, input: [[101], 'x'] }), 'input[1]');
  await rejects400(client.embeddings.create({ model, input: ['x', ''] }), 'input[1]');
  await rejects400(client.embeddings.create({ model, input: [] }), 'input');
  const long = Array(20000).fill(7592);
  await assert.rejects(client.embeddings.create({ model, input: [[101, 102], long] }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'input[1]');
    assert.match(e.message, /20000 tokens.*context holds \d+/);
    return true;
  });
});

test('embeddings: a long input array does not hold the model from another request', async (t) => {
  if (skip) return t.skip(skip);
  if (models.bertSkip) return t.skip(models.bertSkip);
  const model = 'embed';
  const big = client.embeddings.create({ model, input: Array(300).fill('some words to embed here'), encoding_format: 'float' });
  await new Promise((r) => setTimeout(r, 20));
  const t0 = Date.now();
  const small = await client.embeddings.create({ model, input: 'hello' });
  const tSmall = Date.now() - t0;
  const bigRes = await big;
  const tBig = Date.now() - t0;
  assert.equal(small.data.length, 1);
  assert.equal(bigRes.data.length, 300);
  assert.deepEqual(bigRes.data.map((d) => d.index), [...Array(300).keys()]);
  // the small request is served in turn, not after the whole array
  assert.ok(tSmall < tBig, `small ${tSmall} ms, big ${tBig} ms`);
});

test('a client leaving a stream of several prompts cancels every prompt', async (t) => {
  if (skip) return t.skip(skip);
  const { LLAMA_VOCAB } = await import('../lib/models.mjs');
  const file = path.join(models.dir, 'long.gguf');
  const g = await runCli(['gen-model', file, '--vocab', LLAMA_VOCAB, '--ctx', '8192']);
  assert.equal(g.code, 0, g.stderr);
  const s2 = await startServer({ args: ['--model', `long=${file}`, '--parallel', '2'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  try {
    const c2 = new OpenAI({ baseURL: `${s2.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = await c2.completions.create({ prompt: ['Hello', 'Bye'], max_tokens: 8000, temperature: 0, stream: true });
    let n = 0;
    for await (const _ of stream) if (++n === 4) break; // leaving the loop aborts the request
    let m = [];
    for (let i = 0; i < 50 && m.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 100));
      m = [...s2.log().matchAll(/cancelled \(client gone\) after (\d+) completion tokens/g)];
    }
    assert.equal(m.length, 2, `both prompts cancelled:\n${s2.log()}`);
    // both slots are free again
    const c = await c2.completions.create({ prompt: 'Hi', max_tokens: 2, n: 2 });
    assert.equal(c.choices.length, 2);
  } finally {
    await s2.stop();
  }
});
