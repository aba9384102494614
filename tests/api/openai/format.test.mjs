// format.test.mjs - response_format through the official `openai` SDK: a
// json_schema is enforced by the grammar sampler (so even a random-weight
// model answers a document the schema accepts), json_object gives an object,
// and a schema that cannot be compiled is a 400 naming the field. The schema
// used is closed (enums and booleans only) so every valid answer is short and
// max_tokens never cuts it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const MODEL = 'org/tiny';
let srv, client, models, skip;

before(async () => {
  models = await makeModelsDir({});
  if (models.skip) { skip = models.skip; return; }
  srv = await startServer({
    args: ['--models-dir', models.dir, '--default-model', MODEL, '--parallel', '2'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const schema = {
  type: 'object',
  properties: {
    color: { type: 'string', enum: ['red', 'green', 'blue'] },
    ok: { type: 'boolean' },
  },
  required: ['color', 'ok'],
  additionalProperties: false,
};
const rf = { type: 'json_schema', json_schema: { name: 'pick', strict: true, schema } };
const base = { model: MODEL, messages: [{ role: 'user', content: 'Pick a color' }], max_tokens: 120 };

function checkDoc(doc) {
  assert.deepEqual(Object.keys(doc).sort(), ['color', 'ok']);
  assert.ok(['red', 'green', 'blue'].includes(doc.color), JSON.stringify(doc));
  assert.equal(typeof doc.ok, 'boolean');
}

test('json_schema: chat.completions.parse yields a document the schema accepts, at any seed', async (t) => {
  if (skip) return t.skip(skip);
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.parse({ ...base, response_format: rf, temperature: 1, seed });
    assert.equal(r.choices[0].finish_reason, 'stop');
    checkDoc(r.choices[0].message.parsed);
  }
});

test('json_schema: the streamed deltas join into the same kind of document', async (t) => {
  if (skip) return t.skip(skip);
  const stream = await client.chat.completions.create({ ...base, response_format: rf, temperature: 0.8, seed: 7, stream: true });
  let text = '';
  let finish = null;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'stop');
  checkDoc(JSON.parse(text));
});

test('json_object: the answer is a JSON object (prefix when cut by max_tokens)', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.chat.completions.create({ ...base, response_format: { type: 'json_object' }, temperature: 0, max_tokens: 40 });
  const text = r.choices[0].message.content;
  assert.match(text.trimStart(), /^\{/);
  if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object');
});

test('bad response_format values are 400s naming the field', async (t) => {
  if (skip) return t.skip(skip);
  const cases = [
    [{ type: 'yaml' }, 'response_format.type'],
    [{ type: 'json_schema' }, 'response_format.json_schema'],
    [{ type: 'json_schema', json_schema: { schema } }, 'response_format.json_schema.name'],
    [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } } },
      'response_format.json_schema.schema'],
  ];
  for (const [format, param] of cases) {
    await assert.rejects(client.chat.completions.create({ ...base, response_format: format }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, param);
      return true;
    });
  }
});
