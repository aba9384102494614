// llamalike.test.mjs - the phi3, granite and smollm3 architectures
// (src/model/llamalike.c) served end to end: random-weight files of each,
// phi3 and granite with their families' real chat templates
// (../shared/templates; without it, like smollm3, with their families'
// defaults), listed as
// models and answering one chat request through every chat dialect with
// the vendors' own SDKs: OpenAI /v1/chat/completions (openai), Anthropic
// /v1/messages (@anthropic-ai/sdk), Ollama /api/chat (ollama) and LM
// Studio /api/v1/chat (its REST API, which has no Node SDK). The weights
// are random: the tests check that each request is rendered, generated and
// answered, and that the dialects saw the same prompt, not what the text
// says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const MODELS = ['microsoft/phi3', 'ibm/granite', 'hf/smollm3'];
let srv, models, skip, openai, anthropic, ollama;

before(async () => {
  models = await makeModelsDir({ llamalike: true });
  if (models.skip || models.llamalikeSkip) { skip = models.skip || models.llamalikeSkip; return; }
  srv = await startServer({
    args: ['--models-dir', models.dir, '--default-model', MODELS[0]],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: srv.url, apiKey: 'anything', maxRetries: 0 });
  ollama = new Ollama({ host: srv.url });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const SYSTEM = 'You are a terse assistant.';
const USER = 'Name three moons of Jupiter, one per line.';

test('phi3, granite and smollm3 are listed as runnable models', async (t) => {
  if (skip) return t.skip(skip);
  const list = [];
  for await (const m of openai.models.list()) list.push(m.id);
  for (const id of MODELS) assert.ok(list.includes(id), `no ${id} in ${JSON.stringify(list)}`);
  const tags = (await ollama.list()).models.map((m) => m.name);
  for (const id of MODELS) assert.ok(tags.some((n) => n.startsWith(id)), `no ${id} in ${JSON.stringify(tags)}`);
});

for (const id of MODELS) {
  test(`${id}: one chat request through OpenAI, Anthropic, Ollama and LM Studio`, async (t) => {
    if (skip) return t.skip(skip);
    const o = await openai.chat.completions.create({
      model: id, max_tokens: 6, temperature: 0,
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(o.model, id);
    assert.equal(o.choices[0].message.role, 'assistant');
    assert.equal(typeof o.choices[0].message.content, 'string');
    assert.ok(o.usage.completion_tokens >= 1 && o.usage.completion_tokens <= 6);
    // longer than phi3's 8-position window once templated
    assert.ok(o.usage.prompt_tokens > 8, `prompt of ${o.usage.prompt_tokens} tokens`);

    const a = await anthropic.messages.create({
      model: id, max_tokens: 6, temperature: 0, system: SYSTEM, messages: [{ role: 'user', content: USER }],
    });
    assert.equal(a.type, 'message');
    assert.equal(a.content[0].type, 'text');
    assert.ok(['end_turn', 'max_tokens'].includes(a.stop_reason), a.stop_reason);
    assert.equal(a.usage.input_tokens + (a.usage.cache_read_input_tokens ?? 0) +
      (a.usage.cache_creation_input_tokens ?? 0), o.usage.prompt_tokens);

    const l = await ollama.chat({
      model: id, stream: false, options: { num_predict: 6, temperature: 0 },
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: USER }],
    });
    assert.equal(l.message.role, 'assistant');
    assert.equal(typeof l.message.content, 'string');
    assert.equal(l.done, true);
    assert.equal(l.prompt_eval_count, o.usage.prompt_tokens);
    // greedy on the same prompt: the same text as OpenAI's
    assert.equal(l.message.content, o.choices[0].message.content);

    const r = await fetch(`${srv.url}/api/v1/chat`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: id, system_prompt: SYSTEM, input: USER, max_output_tokens: 6, temperature: 0 }),
    });
    assert.equal(r.status, 200);
    const s = await r.json();
    assert.equal(s.model_instance_id, id);
    assert.equal(s.output.at(-1).type, 'message');
    assert.equal(typeof s.output.at(-1).content, 'string');
    assert.ok(s.stats.total_output_tokens >= 1 && s.stats.total_output_tokens <= 6);
  });
}
