// overload.test.mjs - a full engine queue in the Anthropic dialect, through
// the official SDK: 429 rate_limit_error (../shared/specs/anthropic.md 1.3:
// "local concurrency/queue limits"; 529 overloaded_error is for a model
// still loading) with retry-after and retry-after-ms, which the SDK obeys
// when it retries.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startQueueServer, stopQueueServer, fillQueue, MODEL } from '../lib/overload.mjs';

let env;
before(async () => { env = await startQueueServer(); });
after(async () => stopQueueServer(env));

test('a full queue is RateLimitError 429 rate_limit_error with retry-after', async (t) => {
  if (env.skip) return t.skip(env.skip);
  const client = new Anthropic({ baseURL: env.srv.url, apiKey: 'k', maxRetries: 0 });
  const ask = (extra = {}) => client.messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], ...extra });
  await ask(); // load it
  const release = await fillQueue(env.srv);
  try {
    await assert.rejects(ask(), (e) => {
      assert.ok(e instanceof Anthropic.RateLimitError, `not a RateLimitError: ${e}`);
      assert.equal(e.status, 429);
      assert.equal(e.error.type, 'error');
      assert.equal(e.error.error.type, 'rate_limit_error');
      assert.ok(e.error.error.message.length > 0);
      assert.equal(e.headers.get('retry-after'), '1');
      assert.equal(e.headers.get('retry-after-ms'), '1000');
      assert.match(e.requestID, /^req_/);
      return true;
    });
    await assert.rejects(ask({ stream: true }), (e) => e instanceof Anthropic.RateLimitError);
  } finally {
    release();
  }
});
