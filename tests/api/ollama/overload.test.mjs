// overload.test.mjs - a full engine queue in the Ollama dialect, through the
// official `ollama` client: 503 with an error containing "busy" (Ollama's
// own "server busy, please try again.  maximum pending requests exceeded",
// ../shared/specs/ollama.md 0.3 and check 34) and a Retry-After header;
// the requests already running and queued are not disturbed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { startQueueServer, stopQueueServer, fillQueue, MODEL } from '../lib/overload.mjs';

let env;
before(async () => { env = await startQueueServer(); });
after(async () => stopQueueServer(env));

test('a full queue is 503 "server busy" with retry-after', async (t) => {
  if (env.skip) return t.skip(env.skip);
  const client = new Ollama({ host: env.srv.url });
  await client.generate({ model: MODEL, prompt: 'x', options: { num_predict: 1 } }); // load it
  const release = await fillQueue(env.srv);
  try {
    await assert.rejects(client.chat({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }), (e) => {
      assert.equal(e.name, 'ResponseError');
      assert.equal(e.status_code, 503);
      assert.match(e.error, /busy/);
      assert.equal(e.error, 'server busy, please try again.  maximum pending requests exceeded');
      return true;
    });
    // streaming is refused the same way, before the first byte
    await assert.rejects(client.generate({ model: MODEL, prompt: 'x', stream: true }), (e) => e.status_code === 503);
    const raw = await fetch(`${env.srv.url}/api/generate`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: 'x', stream: false }),
    });
    assert.equal(raw.status, 503);
    assert.equal(raw.headers.get('retry-after'), '1');
    assert.deepEqual(await raw.json(), { error: 'server busy, please try again.  maximum pending requests exceeded' });
  } finally {
    release();
  }
  // once the queue drains, the next request is served
  for (let i = 0; ; i++) {
    try {
      const r = await client.generate({ model: MODEL, prompt: 'x', options: { num_predict: 2 } });
      assert.equal(typeof r.response, 'string');
      break;
    } catch (e) {
      if (e.status_code !== 503 || i > 50) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
});
