// chat.test.mjs - OpenAI chat completions, legacy completions, models and
// embeddings through the official `openai` SDK against a tiny generated model
// (spec ../shared/specs/openai.md section 9, checks 1-6, 8, 10-12, 18, 21-23).
// The model is random-weight: the tests check shapes, limits and that the
// streamed and non-streamed paths agree, not what the text says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from '../lib/server.mjs';
import { makeModelsDir } from '../lib/models.mjs';

const MODEL = 'org/tiny';
let srv, client, models, skip;

before(async () => {
  models = await makeModelsDir({ bert: true });
  if (models.skip) { skip = models.skip; return; }
  srv = await startServer({
    args: ['--models-dir', models.dir, '--alias', 'tiny=org/tiny', '--default-model', MODEL, '--parallel', '4'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 0 });
});
after(async () => {
  if (srv) await srv.stop();
  if (models?.cleanup) models.cleanup();
});

const chat = (extra = {}) => ({
  model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 6, temperature: 0, ...extra,
});

test('1. models.list returns the generated models with the OpenAI fields', async (t) => {
  if (skip) return t.skip(skip);
  const list = [];
  for await (const m of client.models.list()) list.push(m);
  assert.ok(list.length >= 1);
  assert.ok(list.some((m) => m.id === MODEL), `no ${MODEL} in ${JSON.stringify(list)}`);
  for (const m of list) {
    assert.equal(m.object, 'model');
    assert.ok(Number.isInteger(m.created));
    assert.equal(m.owned_by, 'parley');
  }
});

test('2. models.retrieve resolves an id holding "/" (sent as %2F) and an alias', async (t) => {
  if (skip) return t.skip(skip);
  const m = await client.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  const r = await fetch(`${srv.url}/v1/models/org%2Ftiny`);
  assert.equal(r.status, 200);
  assert.equal((await r.json()).id, MODEL);
  assert.equal((await client.models.retrieve('tiny')).id, 'tiny');
});

test('3. models.retrieve of an unknown id is a NotFoundError with the error keys', async (t) => {
  if (skip) return t.skip(skip);
  await assert.rejects(client.models.retrieve('does-not-exist'), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.status, 404);
    for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in e.error, `missing ${k}`);
    assert.equal(e.error.code, 'model_not_found');
    assert.match(e.error.message, /does-not-exist/);
    return true;
  });
  // A chat request naming an unknown model gets the same 404.
  await assert.rejects(client.chat.completions.create(chat({ model: 'nope' })),
    (e) => e.status === 404 && e.error.code === 'model_not_found');
});

test('4+5. chat.completions.create: shape, request id, usage arithmetic', async (t) => {
  if (skip) return t.skip(skip);
  const c = await client.chat.completions.create(chat({ max_tokens: 200 }));
  assert.ok(c._request_id && c._request_id.startsWith('req_'));
  assert.equal(c.object, 'chat.completion');
  assert.match(c.id, /^chatcmpl-/);
  assert.equal(c.model, MODEL);
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0].message.role, 'assistant');
  assert.equal(typeof c.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.choices[0].finish_reason));
  assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
  assert.ok(c.usage.prompt_tokens > 5);
  assert.equal(typeof c.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('6. max_completion_tokens: 1 and max_tokens: 1 end with finish_reason length', async (t) => {
  if (skip) return t.skip(skip);
  for (const lim of [{ max_completion_tokens: 1 }, { max_tokens: 1 }]) {
    const c = await client.chat.completions.create({ ...chat(), max_tokens: undefined, ...lim });
    assert.equal(c.choices[0].finish_reason, 'length', JSON.stringify(lim));
    assert.equal(c.usage.completion_tokens, 1);
  }
});

test('8. n: 3 returns three choices indexed 0, 1, 2', async (t) => {
  if (skip) return t.skip(skip);
  const c = await client.chat.completions.create(chat({ n: 3, temperature: 1, seed: 7 }));
  assert.deepEqual(c.choices.map((x) => x.index), [0, 1, 2]);
  for (const ch of c.choices) assert.equal(ch.message.role, 'assistant');
});

test('9. logprobs with top_logprobs 2 (shape)', async (t) => {
  if (skip) return t.skip(skip);
  const c = await client.chat.completions.create(chat({ logprobs: true, top_logprobs: 2, max_tokens: 3 }));
  const lp = c.choices[0].logprobs.content;
  assert.equal(lp.length, 3);
  for (const e of lp) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0);
    assert.ok(Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 2);
    // temperature 0: the chosen token is the most probable one
    assert.ok(e.logprob >= e.top_logprobs[0].logprob - 1e-4);
  }
});

test('10. streaming: chunks only, constant id, role first, same text as non-streamed, [DONE]', async (t) => {
  if (skip) return t.skip(skip);
  const full = await client.chat.completions.create(chat({ max_tokens: 12 }));
  const stream = await client.chat.completions.create(chat({ max_tokens: 12, stream: true }));
  let text = '', ids = new Set(), first = true, finish = null;
  for await (const ch of stream) {
    assert.equal(ch.object, 'chat.completion.chunk');
    ids.add(ch.id);
    if (first) { assert.equal(ch.choices[0].delta.role, 'assistant'); first = false; }
    for (const c of ch.choices) {
      if (c.delta?.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(ids.size, 1);
  assert.equal(text, full.choices[0].message.content);
  assert.equal(finish, full.choices[0].finish_reason);
});

test('11. stream_options.include_usage: usage only on the last chunk, with choices []', async (t) => {
  if (skip) return t.skip(skip);
  const stream = await client.chat.completions.create(chat({ stream: true, stream_options: { include_usage: true } }));
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage && last.usage.completion_tokens === 6);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
  for (const ch of chunks.slice(0, -1)) assert.equal(ch.usage, null);
});

test('12. chat.completions.stream(...).finalChatCompletion() succeeds', async (t) => {
  if (skip) return t.skip(skip);
  const runner = client.chat.completions.stream(chat({ messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'text', text: 'again' }] },
  ] }));
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.role, 'assistant');
  assert.equal(final.choices[0].finish_reason, 'length');
});

test('18. invalid requests are BadRequestErrors naming the field, sent once', async (t) => {
  if (skip) return t.skip(skip);
  const retrying = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything', maxRetries: 2 });
  const before = (srv.log().match(/POST \/v1\/chat\/completions 400/g) || []).length;
  await assert.rejects(retrying.chat.completions.create(chat({ temperature: 5 })), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.error.param, 'temperature');
    return true;
  });
  await assert.rejects(retrying.chat.completions.create(chat({ messages: [] })),
    (e) => e instanceof OpenAI.BadRequestError && e.error.param === 'messages');
  await assert.rejects(retrying.chat.completions.create(chat({ messages: [{ role: 'wizard', content: 'x' }] })),
    (e) => e.status === 400 && e.error.param === 'messages[0].role');
  await assert.rejects(retrying.chat.completions.create(chat({ n: 99 })),
    (e) => e.status === 400 && e.error.param === 'n');
  await assert.rejects(retrying.chat.completions.create(chat({ logit_bias: { 99999999: 1 } })),
    (e) => e.status === 400 && /^logit_bias/.test(e.error.param));
  await new Promise((r) => setTimeout(r, 100));
  const after_ = (srv.log().match(/POST \/v1\/chat\/completions 400/g) || []).length;
  assert.equal(after_ - before, 5, 'each invalid request is sent exactly once');
});

test('7-like. a stop string cuts the output before it', async (t) => {
  if (skip) return t.skip(skip);
  const base = await client.chat.completions.create(chat({ max_tokens: 8, logprobs: true }));
  const toks = base.choices[0].logprobs.content.map((e) => e.token);
  // Stop at the third token's text: the answer is cut before it.
  const cut = toks[2].trim() ? toks[2] : null;
  if (cut) {
    const s = await client.chat.completions.create(chat({ max_tokens: 8, stop: [cut] }));
    assert.equal(s.choices[0].finish_reason, 'stop');
    assert.ok(!s.choices[0].message.content.includes(cut));
    assert.ok(base.choices[0].message.content.startsWith(s.choices[0].message.content));
  }
});

test('21. completions.create: text_completion, echo, streaming ends cleanly', async (t) => {
  if (skip) return t.skip(skip);
  const c = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 5, temperature: 0 });
  assert.equal(c.object, 'text_completion');
  assert.equal(typeof c.choices[0].text, 'string');
  assert.equal(c.choices[0].finish_reason, 'length');
  assert.equal(c.usage.completion_tokens, 5);
  const e = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 5, temperature: 0, echo: true });
  assert.equal(e.choices[0].text, 'Hello' + c.choices[0].text);
  const s = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 5, temperature: 0, stream: true });
  let text = '';
  for await (const ch of s) text += ch.choices[0]?.text ?? '';
  assert.equal(text, c.choices[0].text);
});

test('22-23. embeddings: base64 default equals float, dimensions truncate', async (t) => {
  if (skip) return t.skip(skip);
  if (models.bertSkip) return t.skip(models.bertSkip);
  const model = 'embed';
  const a = await client.embeddings.create({ model, input: ['a', 'b'] }); // SDK asks base64 and decodes
  const f = await client.embeddings.create({ model, input: ['a', 'b'], encoding_format: 'float' });
  assert.equal(a.data.length, 2);
  assert.equal(a.data[0].embedding.length, 64);
  for (let i = 0; i < 2; i++)
    for (let k = 0; k < 64; k++) assert.ok(Math.abs(a.data[i].embedding[k] - f.data[i].embedding[k]) < 1e-6);
  const norm = Math.hypot(...f.data[0].embedding);
  assert.ok(Math.abs(norm - 1) < 1e-4, `norm ${norm}`);
  assert.ok(f.usage.prompt_tokens > 0);
  const d = await client.embeddings.create({ model, input: 'a', dimensions: 16, encoding_format: 'float' });
  assert.equal(d.data[0].embedding.length, 16);
  // truncation then renormalisation, computed here from the full vector
  const head = f.data[0].embedding.slice(0, 16), n = Math.hypot(...head);
  for (let k = 0; k < 16; k++) assert.ok(Math.abs(d.data[0].embedding[k] - head[k] / n) < 1e-5);
  await assert.rejects(client.embeddings.create({ model: MODEL, input: 'a' }),
    (e) => e.status === 400 && e.error.param === 'model');
});

test('4. x-request-id on success, error and stream responses', async (t) => {
  if (skip) return t.skip(skip);
  const post = (body) => fetch(`${srv.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  for (const body of [chat(), chat({ temperature: 9 }), chat({ stream: true })]) {
    const r = await post(body);
    assert.match(r.headers.get('x-request-id') || '', /^req_[0-9a-f]{32}$/, JSON.stringify(body));
    const text = await r.text();
    if (body.stream) {
      assert.match(r.headers.get('content-type'), /text\/event-stream/);
      assert.ok(text.trimEnd().endsWith('data: [DONE]'));
    }
  }
});

test('--model NAME=PATH serves one file under that name; a missing file is refused at start', async (t) => {
  if (skip) return t.skip(skip);
  const { runCli } = await import('../lib/server.mjs');
  const s2 = await startServer({
    args: ['--model', `solo=${models.dir}/org/tiny.gguf`, '--ctx-size', '64', '--parallel', '1'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  try {
    const c2 = new OpenAI({ baseURL: `${s2.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const ids = [];
    // the speech models (pocketsphinx when installed) are listed beside it
    for await (const m of c2.models.list()) if (!/^(pocketsphinx|whisper)/.test(m.id)) ids.push(m.id);
    assert.deepEqual(ids, ['solo']);
    // no model named: the only model is the default
    const c = await c2.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    assert.equal(c.choices[0].finish_reason, 'length');
    // --parallel 1: n 2 is out of range
    await assert.rejects(c2.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }], n: 2 }),
      (e) => e.status === 400 && e.error.param === 'n');
  } finally {
    await s2.stop();
  }
  const r = await runCli(['serve', '--port', '0', '--model', '/nonexistent/x.gguf'], { PARLEY_NO_EXTERNAL_MODELS: '1' });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--model.*\/nonexistent\/x\.gguf/);
});

test('21b. legacy completions logprobs: tokens spell the text, offsets add up', async (t) => {
  if (skip) return t.skip(skip);
  const c = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 4, temperature: 0,
    logprobs: 2, echo: true });
  const ch = c.choices[0], lp = ch.logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal('Hello' + lp.tokens.join(''), ch.text);
  let off = 'Hello'.length;
  for (let i = 0; i < 4; i++) {
    assert.equal(lp.text_offset[i], off);
    off += Buffer.byteLength(lp.tokens[i]);
    assert.ok(lp.token_logprobs[i] <= 0);
    assert.ok(Object.keys(lp.top_logprobs[i]).length >= 1 && Object.keys(lp.top_logprobs[i]).length <= 2);
  }
});

test('generated text never holds U+0000: a <0x00> byte token is dropped, streaming or not', async (t) => {
  if (skip) return t.skip(skip);
  // token 3 is <0x00> in the Llama SentencePiece vocabulary: the bias makes
  // the model sample it (and its neighbour <0x01>, which is kept) every time
  const body = chat({ max_tokens: 6, logit_bias: { 3: 100, 4: 99 }, temperature: 1, seed: 1 });
  const c = await client.chat.completions.create(body);
  assert.equal(c.usage.completion_tokens, 6);
  assert.ok(!c.choices[0].message.content.includes('\u0000'), JSON.stringify(c.choices[0].message.content));
  let streamed = '';
  for await (const ch of await client.chat.completions.create({ ...body, stream: true })) streamed += ch.choices[0]?.delta?.content ?? '';
  assert.ok(!streamed.includes('\u0000'), JSON.stringify(streamed));
  // and a NUL in the history is taken, as OpenAI takes it
  const back = await client.chat.completions.create(chat({ max_tokens: 1, messages: [
    { role: 'user', content: 'a\u0000b' }, { role: 'assistant', content: 'x\u0000' }, { role: 'user', content: 'c' }] }));
  assert.equal(back.choices.length, 1);
});

test('a prompt longer than the context: 400 context_length_exceeded, streaming or not', async (t) => {
  if (skip) return t.skip(skip);
  const long = chat({ messages: [{ role: 'user', content: 'word '.repeat(1500) }] }); // > 1024 positions
  for (const stream of [false, true]) {
    await assert.rejects(client.chat.completions.create({ ...long, stream }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.error.code, 'context_length_exceeded');
      assert.equal(e.error.param, 'messages');
      // OpenAI's own sentence, which clients match
      assert.match(e.error.message, /^This model's maximum context length is 1024 tokens\. However, your messages resulted in \d{4} tokens\. Please reduce the length of the messages\.$/);
      return true;
    });
  }
});

test('a client that leaves a stream cancels its generation', async (t) => {
  if (skip) return t.skip(skip);
  const { runCli } = await import('../lib/server.mjs');
  const file = `${models.dir}/long.gguf`;
  const { LLAMA_VOCAB } = await import('../lib/models.mjs');
  const g = await runCli(['gen-model', file, '--vocab', LLAMA_VOCAB, '--ctx', '8192']);
  assert.equal(g.code, 0, g.stderr);
  const s2 = await startServer({ args: ['--model', `long=${file}`, '--parallel', '1'],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' } });
  try {
    const c2 = new OpenAI({ baseURL: `${s2.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = await c2.completions.create({ prompt: 'Hello', max_tokens: 8000, temperature: 0, stream: true });
    let n = 0;
    for await (const _ of stream) if (++n === 3) break; // leaving the loop aborts the request
    let m = null;
    for (let i = 0; i < 50 && !m; i++) {
      await new Promise((r) => setTimeout(r, 100));
      m = s2.log().match(/cancelled \(client gone\) after (\d+) completion tokens/);
    }
    assert.ok(m, `no cancellation in the log:\n${s2.log()}`);
    assert.ok(Number(m[1]) < 8000, `generated ${m[1]} tokens`);
    // the single slot is free again
    const c = await c2.completions.create({ prompt: 'Hi', max_tokens: 2 });
    assert.equal(c.usage.completion_tokens, 2);
  } finally {
    await s2.stop();
  }
});

test('tools reach the template; a tool round trip is accepted', async (t) => {
  if (skip) return t.skip(skip);
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const plain = await client.chat.completions.create(chat({ max_tokens: 1 }));
  const withTools = await client.chat.completions.create(chat({ max_tokens: 1, tools }));
  // the template writes the tools' JSON into the prompt: many more tokens
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 20,
    `${withTools.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
  const none = await client.chat.completions.create(chat({ max_tokens: 3, tools, tool_choice: 'none' }));
  assert.equal(none.choices[0].message.tool_calls, undefined);
  const round = await client.chat.completions.create(chat({ max_tokens: 3, tools, messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c":21}' },
  ] }));
  assert.equal(round.choices[0].message.role, 'assistant');
  await assert.rejects(client.chat.completions.create(chat({ tools: [{ type: 'function', function: {} }] })),
    (e) => e.status === 400 && e.error.param === 'tools[0].function.name');
});
