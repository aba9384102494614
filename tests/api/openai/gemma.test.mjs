// gemma.test.mjs - a gemma3 model (src/model/gemma.c: sliding-window and
// global layers, q/k norms, GeGLU) served through /v1/chat/completions with
// the official `openai` SDK: listed as a model, a chat request rendered by
// the Gemma family's default template gets a completion, streamed and not,
// and the two agree at temperature 0. The weights are random: the tests
// check that generation runs end to end, not what the text says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const MODEL = 'google/gemma3';
let srv, client, models, skip;

before(async () => {
  models = await makeModelsDir({ gemma: true });
  if (models.skip || models.gemmaSkip) { skip = models.skip || models.gemmaSkip; return; }
  srv = await startServer({
    args: ['--models-dir', models.dir, '--default-model', MODEL],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

// A prompt longer than the 8-position window once templated.
const messages = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Tell me three things about the moon, in one short line each.' },
];

test('the gemma3 model is listed', async (t) => {
  if (skip) return t.skip(skip);
  const list = [];
  for await (const m of client.models.list()) list.push(m.id);
  assert.ok(list.includes(MODEL), `no ${MODEL} in ${JSON.stringify(list)}`);
});

test('a chat completion from gemma3, streamed and not, agrees at temperature 0', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['length', 'stop'].includes(c.finish_reason), c.finish_reason);
  assert.ok(r.usage.prompt_tokens > 8, `prompt of ${r.usage.prompt_tokens} tokens`);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);

  const stream = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 12, temperature: 0, stream: true,
  });
  let text = '';
  let finish = null;
  for await (const ch of stream) {
    for (const d of ch.choices) {
      if (d.delta?.content) text += d.delta.content;
      if (d.finish_reason) finish = d.finish_reason;
    }
  }
  assert.equal(text, c.message.content);
  assert.equal(finish, c.finish_reason);
});
