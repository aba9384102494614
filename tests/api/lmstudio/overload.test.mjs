// overload.test.mjs - a full engine queue in the LM Studio dialect: LM
// Studio's spec names no overloaded answer, and its clients are
// OpenAI-style, so parley answers 429 with LM Studio's error object
// {"error":{message,type,param,code:"rate_limit_exceeded"}} and
// retry-after, on the OpenAI-compatible /api/v0 routes (through the
// official openai SDK, as LM Studio clients use it) and the native
// /api/v1/chat.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startQueueServer, stopQueueServer, fillQueue, MODEL } from '../lib/overload.mjs';
import { client as lms } from './lib.mjs';

let env;
before(async () => { env = await startQueueServer(); });
after(async () => stopQueueServer(env));

test('a full queue is 429 rate_limit_exceeded with retry-after', async (t) => {
  if (env.skip) return t.skip(env.skip);
  const oa = new OpenAI({ baseURL: `${env.srv.url}/api/v0`, apiKey: 'lm-studio', maxRetries: 0 });
  await oa.chat.completions.create({ model: MODEL, max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] });
  const release = await fillQueue(env.srv);
  try {
    await assert.rejects(oa.chat.completions.create({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }), (e) => {
      assert.ok(e instanceof OpenAI.RateLimitError, `not a RateLimitError: ${e}`);
      assert.equal(e.status, 429);
      assert.equal(e.code, 'rate_limit_exceeded');
      assert.ok(e.error.message.length > 0);
      assert.equal(e.headers.get('retry-after'), '1');
      return true;
    });
    const r = await lms(env.srv.url).post('/api/v1/chat', { model: MODEL, input: 'hi', max_output_tokens: 2 });
    assert.equal(r.status, 429, r.text);
    assert.equal(r.headers.get('retry-after'), '1');
    assert.equal(r.json.error.code, 'rate_limit_exceeded');
    assert.equal(typeof r.json.error.message, 'string');
  } finally {
    release();
  }
});
