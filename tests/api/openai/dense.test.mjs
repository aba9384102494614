// dense.test.mjs - the olmo2, exaone4, glm4 and mistral3 decoders
// (src/model/olmo2.c, glm4.c, llamalike.c) and the nomic-bert encoder (bert.c) served through
// every dialect with the
// vendors' own SDKs: a chat request to /v1/chat/completions (openai),
// /v1/messages (@anthropic-ai/sdk), /api/chat (ollama) and LM Studio's
// /api/v1/chat (fetch: it has no JS client) for each decoder, glm4 and
// mistral3 with their real chat templates from ../shared/templates (GLM-4.7,
// Ministral 3 Reasoning; olmo2 and exaone4 have none there: their
// families' default), and
// embeddings from nomic-bert on /v1/embeddings
// and /api/embed, and from gemma-embedding (EmbeddingGemma, gemma.c) and a
// qwen3 file with last-token pooling (Qwen3-Embedding's layout) on
// /v1/embeddings, /api/embed and LM Studio's /api/v0/embeddings, the
// vectors of token-id inputs held against the numpy references in tools/
// (ref_gemma.py, ref_qwen.py). Random weights: the chat tests check that
// each request runs end to end through the family's template and model,
// not what it says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB, BERT_VOCAB, sharedTemplate, templateArgs, noTemplate } from '../lib/models.mjs';

// without ../shared: the families' default templates
const GLM_TEMPLATE = sharedTemplate('GLM-4.7-Flash.jinja');
const MINISTRAL_NAME = 'mistralai-Ministral-3-14B-Reasoning-2512.jinja';
const MINISTRAL_TEMPLATE = sharedTemplate(MINISTRAL_NAME);
const CHAT_MODELS = ['dense/olmo2', 'dense/glm4', 'dense/mistral3', 'dense/exaone4'];
const EMBED_MODEL = 'dense/nomic';
const GEMB_MODEL = 'dense/embeddinggemma';
const QWEMB_MODEL = 'dense/qwen3-embedding';
const TOOLS = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../../tools');
let srv, dir, skip;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-dense-'));
  mkdirSync(path.join(dir, 'dense'));
  const gen = [
    ['dense/olmo2.gguf', '--arch', 'olmo2', '--vocab', LLAMA_VOCAB, '--ctx', '1024'],
    ['dense/glm4.gguf', '--arch', 'glm4', '--vocab', LLAMA_VOCAB, ...templateArgs(GLM_TEMPLATE), '--ctx', '1024'],
    ['dense/mistral3.gguf', '--arch', 'mistral3', '--vocab', LLAMA_VOCAB, ...templateArgs(MINISTRAL_TEMPLATE),
      '--ctx', '1024'],
    ['dense/exaone4.gguf', '--arch', 'exaone4', '--vocab', LLAMA_VOCAB, '--ctx', '1024'],
    ['dense/nomic.gguf', '--arch', 'nomic-bert', '--vocab', BERT_VOCAB],
    ['dense/embeddinggemma.gguf', '--arch', 'gemma-embedding', '--vocab', LLAMA_VOCAB],
    ['dense/qwen3-embedding.gguf', '--arch', 'qwen3', '--vocab', LLAMA_VOCAB, '--pooling', 'last'],
  ];
  // an XLM-RoBERTa-layout bert file (bge-m3's): the unigram vocabulary
  // tools/ref_ugm.py writes (../shared/vocab has none), when python has numpy
  if (spawnSync('/usr/bin/python3', ['-c', 'import numpy']).status === 0) {
    const vocab = path.join(dir, 'ugm-vocab.gguf');
    const r = spawnSync('/usr/bin/python3', [path.join(TOOLS, 'ref_ugm.py'), 'make', vocab, '7']);
    if (r.status !== 0) throw new Error(`ref_ugm.py make failed: ${r.stderr}`);
    gen.push(['dense/xlmr-bert.gguf', '--arch', 'bert', '--vocab', vocab]);
  }
  for (const [out, ...args] of gen) {
    const r = await runCli(['gen-model', path.join(dir, out), ...args]);
    if (r.code !== 0) throw new Error(`gen-model ${out} failed: ${r.stderr}`);
  }
  srv = await startServer({ args: ['--models-dir', dir], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
});
after(async () => {
  if (srv) await srv.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const SYSTEM = 'You are a terse assistant.';
const USER = 'Name three colours.';

test('the models are listed as runnable on /v1/models', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  for (const m of [...CHAT_MODELS, EMBED_MODEL, GEMB_MODEL, QWEMB_MODEL]) assert.ok(ids.includes(m), `no ${m} in ${JSON.stringify(ids)}`);
});

test('dense/mistral3: /api/show reports it runnable, with thinking from the [THINK] template', async (t) => {
  if (skip) return t.skip(skip);
  if (!MINISTRAL_TEMPLATE) return t.skip(noTemplate(MINISTRAL_NAME));
  const r = await new Ollama({ host: srv.url }).show({ model: 'dense/mistral3' });
  assert.equal(r.details.family, 'mistral3'); // Ollama's family is the architecture
  assert.ok(r.capabilities.includes('completion'), JSON.stringify(r.capabilities));
  assert.ok(r.capabilities.includes('thinking'), JSON.stringify(r.capabilities));
  assert.ok(r.template.includes('[THINK]'));
});

for (const model of CHAT_MODELS) {
  test(`${model}: a chat completion through the openai SDK`, async (t) => {
    if (skip) return t.skip(skip);
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const r = await client.chat.completions.create({
      model, max_tokens: 6, temperature: 0,
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(r.model, model);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 5 && r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 6);
  });

  test(`${model}: a message through the anthropic SDK`, async (t) => {
    if (skip) return t.skip(skip);
    const client = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
    const r = await client.messages.create({
      model, max_tokens: 6, temperature: 0, system: SYSTEM, messages: [{ role: 'user', content: USER }],
    });
    assert.equal(r.type, 'message');
    assert.equal(r.role, 'assistant');
    // the GLM-4.7 template opens a thinking block, so the first tokens may be thinking
    assert.ok(r.content.length >= 1);
    for (const c of r.content) assert.ok(['text', 'thinking'].includes(c.type), c.type);
    assert.ok(['max_tokens', 'end_turn', 'stop_sequence'].includes(r.stop_reason), r.stop_reason);
    // the prompt prefix may come from the cache (the openai request before it)
    const prompt = r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0);
    assert.ok(prompt > 5 && r.usage.output_tokens >= 1 && r.usage.output_tokens <= 6,
      JSON.stringify(r.usage));
  });

  test(`${model}: a chat through the ollama SDK`, async (t) => {
    if (skip) return t.skip(skip);
    const client = new Ollama({ host: srv.url });
    const r = await client.chat({
      model, options: { num_predict: 6, temperature: 0 },
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(r.model, model);
    assert.equal(r.message.role, 'assistant');
    assert.equal(typeof r.message.content, 'string');
    assert.equal(r.done, true);
    assert.ok(r.prompt_eval_count > 5 && r.eval_count >= 1 && r.eval_count <= 6);
  });

  test(`${model}: a chat through LM Studio's /api/v1/chat`, async (t) => {
    if (skip) return t.skip(skip);
    const res = await fetch(`${srv.url}/api/v1/chat`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, system_prompt: SYSTEM, input: USER, max_output_tokens: 6, temperature: 0 }),
    });
    const b = await res.json();
    assert.equal(res.status, 200, JSON.stringify(b));
    assert.equal(b.model_instance_id, model);
    assert.equal(b.output.at(-1).type, 'message');
    assert.equal(typeof b.output.at(-1).content, 'string');
    assert.ok(b.stats.input_tokens > 5 && b.stats.total_output_tokens >= 1 && b.stats.total_output_tokens <= 6);
  });
}

test('nomic-bert: embeddings through the openai and ollama SDKs, normalized and equal', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const r = await client.embeddings.create({ model: EMBED_MODEL, input: ['red and blue', 'green'], encoding_format: 'float' });
  assert.equal(r.data.length, 2);
  const [a, b] = r.data.map((d) => d.embedding);
  assert.equal(a.length, 64);
  const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  assert.ok(Math.abs(norm(a) - 1) < 1e-4 && Math.abs(norm(b) - 1) < 1e-4);
  assert.notDeepEqual(a, b);
  const o = await new Ollama({ host: srv.url }).embed({ model: EMBED_MODEL, input: 'red and blue' });
  assert.equal(o.embeddings.length, 1);
  const dot = o.embeddings[0].reduce((s, x, i) => s + x * a[i], 0);
  assert.ok(dot > 0.9999, `cosine ${dot}`);
});

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const cos = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));

// The numpy reference's pooled, normalized vector of token ids (null when
// /usr/bin/python3 has no numpy: the comparison is then skipped).
function refEmbed(script, file, ids, extra = []) {
  if (spawnSync('/usr/bin/python3', ['-c', 'import numpy']).status !== 0) return null;
  const out = path.join(dir, 'ref.f32');
  const r = spawnSync('/usr/bin/python3', [path.join(TOOLS, script), 'embed', file, ids.join(','), out, '--normalize',
    ...extra]);
  if (r.status !== 0) throw new Error(`${script} failed: ${r.stderr}`);
  const b = readFileSync(out);
  return Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
}

const IDS = [2, 17, 42, 299, 3, 150, 150, 7, 88, 254, 12, 31, 64, 102, 11, 19];

test('gemma-embedding: one vector through /v1/embeddings, /api/embed and /api/v0/embeddings, and numpy\'s', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const r = await client.embeddings.create({ model: GEMB_MODEL, input: ['red and blue', 'green'], encoding_format: 'float' });
  assert.equal(r.data.length, 2);
  const [a, b] = r.data.map((d) => d.embedding);
  assert.equal(a.length, 64);
  assert.ok(Math.abs(norm(a) - 1) < 1e-4 && Math.abs(norm(b) - 1) < 1e-4);
  assert.notDeepEqual(a, b);
  const o = await new Ollama({ host: srv.url }).embed({ model: GEMB_MODEL, input: 'red and blue' });
  assert.equal(o.embeddings.length, 1);
  assert.ok(cos(o.embeddings[0], a) > 0.9999, `ollama vs openai cosine ${cos(o.embeddings[0], a)}`);
  const res = await fetch(`${srv.url}/api/v0/embeddings`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: GEMB_MODEL, input: 'red and blue' }),
  });
  const lm = await res.json();
  assert.equal(res.status, 200, JSON.stringify(lm));
  assert.ok(cos(lm.data[0].embedding, a) > 0.9999, `lmstudio vs openai cosine ${cos(lm.data[0].embedding, a)}`);
  // token ids (longer than the sliding window of 8) against the numpy encoder
  const ids = await client.embeddings.create({ model: GEMB_MODEL, input: [IDS], encoding_format: 'float' });
  const ref = refEmbed('ref_gemma.py', path.join(dir, 'dense/embeddinggemma.gguf'), IDS);
  if (ref) assert.ok(cos(ids.data[0].embedding, ref) >= 0.9999, `vs numpy: cosine ${cos(ids.data[0].embedding, ref)}`);
});

test('gemma-embedding: /v0/models types it as embeddings, /api/show as an embedding model', async (t) => {
  if (skip) return t.skip(skip);
  const res = await fetch(`${srv.url}/api/v0/models`);
  const entry = (await res.json()).data.find((m) => m.id === GEMB_MODEL);
  assert.equal(entry?.type, 'embeddings', JSON.stringify(entry));
  const show = await new Ollama({ host: srv.url }).show({ model: GEMB_MODEL });
  assert.deepEqual(show.capabilities, ['embedding']);
});

test('qwen3 with pooling_type last (Qwen3-Embedding): the last token\'s normalized state, as numpy has it', async (t) => {
  if (skip) return t.skip(skip);
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const r = await client.embeddings.create({ model: QWEMB_MODEL, input: [IDS, IDS.slice(0, 5)], encoding_format: 'float' });
  const [a, b] = r.data.map((d) => d.embedding);
  assert.equal(a.length, 64);
  assert.ok(Math.abs(norm(a) - 1) < 1e-4);
  const o = await new Ollama({ host: srv.url }).embed({ model: QWEMB_MODEL, input: 'red and blue' });
  assert.ok(Math.abs(norm(o.embeddings[0]) - 1) < 1e-4);
  const file = path.join(dir, 'dense/qwen3-embedding.gguf');
  const ref = refEmbed('ref_qwen.py', file, IDS);
  if (!ref) return;
  assert.ok(cos(a, ref) >= 0.9999, `vs numpy last: cosine ${cos(a, ref)}`);
  assert.ok(cos(b, refEmbed('ref_qwen.py', file, IDS.slice(0, 5))) >= 0.9999);
  // the file's pooling is what decides: numpy's mean of the same tokens is another vector
  const mean = refEmbed('ref_qwen.py', file, IDS, ['--pooling', 'mean']);
  assert.ok(cos(a, mean) < 0.99, `mean pooling would give cosine ${cos(a, mean)}`);
});

test('bert with a unigram ("t5") vocabulary, as bge-m3: text embeds as its unigram ids do', async (t) => {
  if (skip) return t.skip(skip);
  if (!existsSync(path.join(dir, 'dense/xlmr-bert.gguf'))) return t.skip('/usr/bin/python3 has no numpy');
  const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
  // "hello world" is <s> ▁hello ▁world </s> in that vocabulary (ids from tools/ref_ugm.py's lattice)
  const ids = spawnSync('/usr/bin/python3', ['-c', `import sys; sys.path.insert(0, ${JSON.stringify(TOOLS)});
from ref_ugm import Unigram; print(",".join(map(str, Unigram(sys.argv[1]).encode(b"hello world"))))`,
  path.join(dir, 'ugm-vocab.gguf')]).stdout.toString().trim().split(',').map(Number);
  assert.equal(ids.length, 4, JSON.stringify(ids));
  const r = await client.embeddings.create({ model: 'dense/xlmr-bert', input: 'hello world', encoding_format: 'float' });
  const a = r.data[0].embedding;
  assert.ok(Math.abs(norm(a) - 1) < 1e-4);
  assert.equal(r.usage.prompt_tokens, 4);
  const r2 = await client.embeddings.create({ model: 'dense/xlmr-bert', input: [ids], encoding_format: 'float' });
  const b = r2.data[0].embedding;
  assert.ok(cos(a, b) > 0.99999, `text vs its ids: cosine ${cos(a, b)}`);
  const o = await new Ollama({ host: srv.url }).embed({ model: 'dense/xlmr-bert', input: 'hello world' });
  assert.ok(cos(o.embeddings[0], a) > 0.9999);
});
