// resp_tools.test.mjs - the Responses API's tool types through the official
// `openai` SDK (spec ../shared/specs/openai.md 4.2): Codex's default request
// (a namespace of function tools plus the hosted web_search) runs; a forced
// call to a namespace member is a function_call naming its namespace; a
// forced call to a custom tool is a custom_tool_call whose input follows the
// tool's regex grammar, streamed with the custom_tool_call_input events; the
// call and output items of every client-run kind (custom, local_shell,
// shell, apply_patch) are accepted as input and render into the prompt;
// hosted tools are left out of what the model sees and forcing one is a 400.
// The model is random-weight with the real Qwen2.5 template (Hermes-style
// calls): the grammar sampler makes it write the forced calls.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const MODEL = 'org/hermes';
let srv, client, models, skip;

before(async () => {
  models = await makeModelsDir({ hermes: true });
  if (models.skip || models.hermesSkip) { skip = models.skip || models.hermesSkip; return; }
  srv = await startServer({ args: ['--models-dir', models.dir, '--parallel', '2'], env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const crm = {
  type: 'namespace', name: 'crm', description: 'Customer records.',
  tools: [{ type: 'function', name: 'lookup', description: 'Find a customer',
    parameters: { type: 'object', properties: { id: { type: 'string', maxLength: 8 } }, required: ['id'], additionalProperties: false } }],
};
const word = { type: 'custom', name: 'word', description: 'Say one word',
  format: { type: 'grammar', syntax: 'regex', definition: '[a-z]{1,6}' } };
const count = (body) => client.responses.inputTokens.count({ model: MODEL, ...body }).then((r) => r.input_tokens);

test("Codex's default tools: a namespace and web_search are accepted; only the namespace reaches the prompt", async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.responses.create({ model: MODEL, input: 'Find customer 7', tools: [crm, { type: 'web_search' }],
    max_output_tokens: 8 });
  assert.ok(['completed', 'incomplete'].includes(r.status));
  assert.deepEqual(r.tools, [crm, { type: 'web_search' }]);
  const none = await count({ input: 'Find customer 7' });
  const withNs = await count({ input: 'Find customer 7', tools: [crm] });
  const both = await count({ input: 'Find customer 7', tools: [crm, { type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs_1'] }] });
  assert.ok(withNs > none, `${withNs} vs ${none}`);
  assert.equal(both, withNs);
});

test('a forced namespace member is a function_call with namespace, streamed in order', async (t) => {
  if (skip) return t.skip(skip);
  for (const name of ['lookup', 'crm.lookup']) {
    const r = await client.responses.create({ model: MODEL, input: 'Find customer 7', tools: [crm, { type: 'web_search' }],
      tool_choice: { type: 'function', name }, max_output_tokens: 100 });
    const fc = r.output.find((o) => o.type === 'function_call');
    assert.ok(fc, JSON.stringify(r.output));
    assert.equal(fc.name, 'lookup');
    assert.equal(fc.namespace, 'crm');
    assert.match(fc.id, /^fc_/);
    assert.equal(typeof JSON.parse(fc.arguments).id, 'string');
  }
  const stream = client.responses.stream({ model: MODEL, input: 'Find customer 7', tools: [crm],
    tool_choice: { type: 'function', name: 'lookup' }, max_output_tokens: 100 });
  const types = [];
  for await (const ev of stream) types.push(ev.type);
  const final = await stream.finalResponse();
  const fc = final.output.find((o) => o.type === 'function_call');
  assert.equal(fc.namespace, 'crm');
  assert.ok(types.includes('response.function_call_arguments.delta'));
  // the call and its output continue the conversation
  const next = await client.responses.create({ model: MODEL, previous_response_id: final.id, tools: [crm], max_output_tokens: 4,
    input: [{ type: 'function_call_output', call_id: fc.call_id, output: '{"name":"Ada"}' }] });
  assert.ok(next.usage.input_tokens > final.usage.input_tokens);
});

test('a forced custom tool is a custom_tool_call whose input follows its regex grammar', async (t) => {
  if (skip) return t.skip(skip);
  const r = await client.responses.create({ model: MODEL, input: 'Say a word', tools: [word, crm],
    tool_choice: { type: 'custom', name: 'word' }, max_output_tokens: 60 });
  const call = r.output.find((o) => o.type === 'custom_tool_call');
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, 'word');
  assert.match(call.input, /^[a-z]{1,6}$/);
  assert.match(call.call_id, /^call_/);
  assert.equal(call.status, 'completed');
  const stream = client.responses.stream({ model: MODEL, input: 'Say a word', tools: [word],
    tool_choice: { type: 'custom', name: 'word' }, max_output_tokens: 60 });
  const events = [];
  for await (const ev of stream) events.push(ev);
  const final = await stream.finalResponse();
  const sc = final.output.find((o) => o.type === 'custom_tool_call');
  assert.match(sc.input, /^[a-z]{1,6}$/);
  const added = events.find((e) => e.type === 'response.output_item.added');
  assert.equal(added.item.type, 'custom_tool_call');
  assert.equal(added.item.input, '');
  const deltas = events.filter((e) => e.type === 'response.custom_tool_call_input.delta');
  assert.equal(deltas.map((e) => e.delta).join(''), sc.input);
  assert.ok(deltas.every((e) => e.item_id === sc.id));
  assert.equal(events.find((e) => e.type === 'response.custom_tool_call_input.done').input, sc.input);
  // the stored copy replays the same items
  assert.deepEqual((await client.responses.retrieve(final.id)).output, final.output);
  const next = await client.responses.create({ model: MODEL, previous_response_id: final.id, tools: [word], max_output_tokens: 4,
    input: [{ type: 'custom_tool_call_output', call_id: sc.call_id, output: 'heard it' }] });
  assert.ok(next.usage.input_tokens > final.usage.input_tokens);
});

test('the call and output items of every client-run kind are accepted as input and reach the prompt', async (t) => {
  if (skip) return t.skip(skip);
  const tools = [word, { type: 'local_shell' }, { type: 'shell' }, { type: 'apply_patch' },
    { type: 'computer_use_preview', display_width: 800, display_height: 600, environment: 'linux' }];
  const user = { role: 'user', content: 'Work on the repo' };
  const history = [
    user,
    { type: 'custom_tool_call', call_id: 'c1', name: 'word', input: 'hello' },
    { type: 'custom_tool_call_output', call_id: 'c1', output: 'ok' },
    { type: 'local_shell_call', id: 'lsh_1', call_id: 'c2', status: 'completed',
      action: { type: 'exec', command: ['ls', '-la'], env: {} } },
    { type: 'local_shell_call_output', id: 'c2', output: 'README.md' },
    { type: 'shell_call', call_id: 'c3', action: { commands: ['git status'] } },
    { type: 'shell_call_output', call_id: 'c3', output: [{ stdout: 'clean', stderr: '', outcome: { type: 'exit', exit_code: 0 } }] },
    { type: 'apply_patch_call', call_id: 'c4', status: 'completed',
      operation: { type: 'update_file', path: 'README.md', diff: '@@\n-a\n+b\n' } },
    { type: 'apply_patch_call_output', call_id: 'c4', status: 'completed', output: 'applied' },
    { type: 'function_call', call_id: 'c5', name: 'lookup', namespace: 'crm', arguments: '{"id":"7"}' },
    { type: 'function_call_output', call_id: 'c5', output: 'Ada' },
  ];
  // (the tools' schemas with this history outgrow the test model's 1024
  // positions, so the answer is made without them; counting needs no room)
  const r = await client.responses.create({ model: MODEL, input: history, max_output_tokens: 4 });
  assert.ok(['completed', 'incomplete'].includes(r.status));
  const items = await client.responses.inputItems.list(r.id, { order: 'asc' });
  assert.deepEqual(items.data.map((it) => it.type), history.map((it) => it.type ?? 'message'));
  assert.ok(items.data.every((it) => typeof it.id === 'string' && it.id.length > 0));
  // each pair adds to the prompt; the tools themselves do too
  let prev = await count({ input: [user], tools: [...tools, crm] });
  for (let k = 3; k <= history.length; k += 2) {
    const n = await count({ input: history.slice(0, k), tools: [...tools, crm] });
    assert.ok(n > prev, `${history[k - 2].type}: ${n} vs ${prev}`);
    prev = n;
  }
  assert.ok(await count({ input: [user], tools }) > await count({ input: [user] }));
  // a screenshot is an image: refused, naming the item
  await assert.rejects(client.responses.create({ model: MODEL, tools, max_output_tokens: 4, input: [user,
    { type: 'computer_call', call_id: 'c6', action: { type: 'screenshot' }, pending_safety_checks: [], status: 'completed' },
    { type: 'computer_call_output', call_id: 'c6', output: { type: 'computer_screenshot', image_url: 'data:image/png;base64,AA==' } }] }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'input' && /input\[2\]/.test(e.message));
});

test('tool errors: forcing a hosted tool or one not offered, an unknown type, a repeated name', async (t) => {
  if (skip) return t.skip(skip);
  const cases = [
    [{ tools: [{ type: 'web_search' }, crm], tool_choice: { type: 'web_search_preview' } }, 'tool_choice', /hosted/],
    [{ tools: [crm], tool_choice: { type: 'shell' } }, 'tool_choice', /shell/],
    [{ tools: [crm], tool_choice: { type: 'function', name: 'nope' } }, 'tool_choice', /nope/],
    [{ tools: [{ type: 'telepathy' }] }, 'tools', /tools\[0\]\.type/],
    [{ tools: [{ type: 'shell' }, { type: 'function', name: 'shell' }] }, 'tools', /tools\[1\]/],
    [{ tools: [{ type: 'namespace', name: 'crm', tools: [{ type: 'web_search' }] }] }, 'tools', /tools\[0\]\.tools\[0\]/],
  ];
  for (const [extra, param, msg] of cases) {
    await assert.rejects(client.responses.create({ model: MODEL, input: 'x', max_output_tokens: 4, ...extra }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: ${e}`);
      assert.equal(e.param, param);
      assert.match(e.message, msg);
      return true;
    });
  }
});
