// overload.test.mjs - a full engine queue in the OpenAI dialect, through the
// official SDK: 429 RateLimitError, type "requests", code
// rate_limit_exceeded (../shared/specs/openai.md 1.4), retry-after and
// retry-after-ms; with retries on, the SDK waits and tries again (and the
// request succeeds once the queue has room).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startQueueServer, stopQueueServer, fillQueue, MODEL } from '../lib/overload.mjs';

let env;
before(async () => { env = await startQueueServer(); });
after(async () => stopQueueServer(env));

test('a full queue is RateLimitError 429 with retry-after', async (t) => {
  if (env.skip) return t.skip(env.skip);
  const client = new OpenAI({ baseURL: `${env.srv.url}/v1`, apiKey: 'k', maxRetries: 0 });
  const ask = (extra = {}) => client.chat.completions.create({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }], ...extra });
  await ask(); // load it
  const release = await fillQueue(env.srv);
  try {
    await assert.rejects(ask(), (e) => {
      assert.ok(e instanceof OpenAI.RateLimitError, `not a RateLimitError: ${e}`);
      assert.equal(e.status, 429);
      assert.deepEqual(Object.keys(e.error).sort(), ['code', 'message', 'param', 'type']);
      assert.equal(e.error.type, 'requests');
      assert.equal(e.code, 'rate_limit_exceeded');
      assert.equal(e.headers.get('retry-after'), '1');
      assert.equal(e.headers.get('retry-after-ms'), '1000');
      assert.equal(e.headers.get('x-should-retry'), null);
      return true;
    });
    await assert.rejects(ask({ stream: true }), (e) => e instanceof OpenAI.RateLimitError);
    await assert.rejects(client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 2 }),
      (e) => e instanceof OpenAI.RateLimitError);
  } finally {
    release();
  }
  // the SDK's own retries (retry-after-ms 1000) get through once the queue drains
  const retrying = new OpenAI({ baseURL: `${env.srv.url}/v1`, apiKey: 'k', maxRetries: 5 });
  const r = await retrying.chat.completions.create({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.object, 'chat.completion');
});
