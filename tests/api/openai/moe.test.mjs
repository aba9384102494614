// moe.test.mjs - the qwen2moe, olmoe and granitemoe mixtures of experts
// (src/model/qwen2moe.c, olmoe.c, granitemoe.c over moe_dec.c) served
// through every chat dialect with the vendors' own SDKs: /v1/chat/completions
// (openai), /v1/messages (@anthropic-ai/sdk), /api/chat (ollama) and LM
// Studio's /api/v1/chat (fetch: it has no JS client). qwen2moe carries the
// real Qwen2.5 template and granitemoe Granite 3.3's from ../shared/templates;
// olmoe has none there and renders its family's default. Then the parameter
// counts of a MoE file: `parley list --json` and Ollama's /api/show
// (model_info, details) give the total and the active count (the experts a
// token does not use left out), checked against counts worked out here from
// the file's shape. Random weights: the chats check that each request runs
// end to end, not what it says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startServer, runCli } from '../lib/server.mjs';
import { LLAMA_VOCAB, LLAMA_VOCAB_TOKENS, sharedTemplate, templateArgs } from '../lib/models.mjs';

// without ../shared: the families' default templates
const QWEN_TEMPLATE = sharedTemplate('Qwen-Qwen2.5-7B-Instruct.jinja');
const GRANITE_TEMPLATE = sharedTemplate('ibm-granite-granite-3.3-2B-Instruct.jinja');
const MODELS = ['moe/qwen2moe', 'moe/olmoe', 'moe/granitemoe'];
let srv, dir, skip;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'parley-moe-'));
  mkdirSync(path.join(dir, 'moe'));
  const gen = [
    ['moe/qwen2moe.gguf', '--arch', 'qwen2moe', ...templateArgs(QWEN_TEMPLATE)],
    ['moe/olmoe.gguf', '--arch', 'olmoe'],
    ['moe/granitemoe.gguf', '--arch', 'granitemoe', ...templateArgs(GRANITE_TEMPLATE)],
  ];
  for (const [out, ...args] of gen) {
    const r = await runCli(['gen-model', path.join(dir, out), ...args, '--vocab', LLAMA_VOCAB, '--ctx', '1024']);
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

for (const model of MODELS) {
  test(`${model}: one chat through OpenAI, Anthropic, Ollama and LM Studio`, async (t) => {
    if (skip) return t.skip(skip);
    const openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const o = await openai.chat.completions.create({
      model, max_tokens: 6, temperature: 0,
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(o.model, model);
    assert.equal(o.choices[0].message.role, 'assistant');
    assert.equal(typeof o.choices[0].message.content, 'string');
    assert.ok(['length', 'stop'].includes(o.choices[0].finish_reason), o.choices[0].finish_reason);
    assert.ok(o.usage.prompt_tokens > 5 && o.usage.completion_tokens >= 1 && o.usage.completion_tokens <= 6);

    const anthropic = new Anthropic({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
    const a = await anthropic.messages.create({
      model, max_tokens: 6, temperature: 0, system: SYSTEM, messages: [{ role: 'user', content: USER }],
    });
    assert.equal(a.type, 'message');
    assert.equal(a.role, 'assistant');
    assert.ok(a.content.length >= 1);
    for (const c of a.content) assert.ok(['text', 'thinking'].includes(c.type), c.type);
    assert.ok(['max_tokens', 'end_turn', 'stop_sequence'].includes(a.stop_reason), a.stop_reason);
    // the same rendered prompt (part of it may come from the prefix cache)
    assert.equal(a.usage.input_tokens + (a.usage.cache_read_input_tokens ?? 0) +
      (a.usage.cache_creation_input_tokens ?? 0), o.usage.prompt_tokens);

    const l = await new Ollama({ host: srv.url }).chat({
      model, stream: false, options: { num_predict: 6, temperature: 0 },
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(l.model, model);
    assert.equal(l.message.role, 'assistant');
    assert.equal(l.done, true);
    assert.equal(l.prompt_eval_count, o.usage.prompt_tokens);
    // greedy on the same prompt: the same text as OpenAI's
    assert.equal(l.message.content, o.choices[0].message.content);

    const res = await fetch(`${srv.url}/api/v1/chat`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, system_prompt: SYSTEM, input: USER, max_output_tokens: 6, temperature: 0 }),
    });
    const s = await res.json();
    assert.equal(res.status, 200, JSON.stringify(s));
    assert.equal(s.model_instance_id, model);
    assert.equal(s.output.at(-1).type, 'message');
    assert.equal(typeof s.output.at(-1).content, 'string');
    assert.ok(s.stats.total_output_tokens >= 1 && s.stats.total_output_tokens <= 6);
  });
}

// The qwen2moe file of `gen-model --arch qwen2moe` (testgen_arch's small
// shape) with the llama vocabulary: n_embd 64, 2 layers, 4 heads of 16 on 2
// KV heads, q/k/v biases, 4 experts of 32 of which 2 are used, a shared
// expert of 48 with its gate, the vocabulary's tokens, untied output.
function qwen2moeCounts() {
  const E = 64, hd = 16, Q = 4 * hd, KV = 2 * hd, V = LLAMA_VOCAB_TOKENS, X = 4, k = 2, F = 32, S = 48, L = 2;
  const attn = E + E * Q + 2 * E * KV + Q + 2 * KV + Q * E + E; // norms, q/k/v/o, biases
  const shared = E + 3 * E * S; // gate_inp_shexp, gate/up/down_shexp
  const experts = 3 * E * F * X; // gate/up/down_exps of all experts
  const total = L * (attn + E * X + shared + experts) + 2 * V * E + E;
  return { total, active: total - L * (experts / X) * (X - k) };
}

test('parley list --json: total and active parameters of a MoE file', async (t) => {
  if (skip) return t.skip(skip);
  const r = await runCli(['list', '--json', '--models-dir', dir], { env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  assert.equal(r.code, 0, r.stderr);
  const byName = Object.fromEntries(JSON.parse(r.stdout).models.map((m) => [m.name, m]));
  const { total, active } = qwen2moeCounts();
  assert.equal(byName['moe/qwen2moe'].parameters, total);
  assert.equal(byName['moe/qwen2moe'].active_parameters, active);
  for (const m of MODELS) {
    assert.ok(byName[m].active_parameters < byName[m].parameters, m);
    assert.equal(byName[m].executable, true, m);
  }
  const table = await runCli(['list', '--models-dir', dir], { env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  assert.match(table.stdout, /PARAMS/);
  const mega = (x) => (x / 1e6).toFixed(2).replace('.', '\\.');
  assert.match(table.stdout, new RegExp(`moe/qwen2moe\\s+\\S+ \\S+\\s+${mega(total)}M/${mega(active)}M\\s`));
});

test('/api/show: model_info and details carry the total and active counts', async (t) => {
  if (skip) return t.skip(skip);
  const { total, active } = qwen2moeCounts();
  const r = await new Ollama({ host: srv.url }).show({ model: 'moe/qwen2moe' });
  assert.equal(r.model_info['general.parameter_count'], total);
  assert.equal(r.model_info['parley.active_parameter_count'], active);
  assert.equal(r.model_info['qwen2moe.expert_count'], 4);
  assert.equal(r.details.family, 'qwen2moe');
  const millions = (x) => `${Math.round(x / 1e6)}M`; // Ollama's style below a billion
  assert.equal(r.details.parameter_size, millions(total));
  assert.equal(r.details.active_parameter_size, millions(active));
  assert.ok(r.capabilities.includes('completion'), JSON.stringify(r.capabilities));
  // /api/tags carries the same details
  const tags = await new Ollama({ host: srv.url }).list();
  const q = tags.models.find((m) => m.name.startsWith('moe/qwen2moe'));
  assert.equal(q.details.active_parameter_size, millions(active));
});
