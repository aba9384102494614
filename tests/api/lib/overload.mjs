// overload.mjs - brings a server to its "overloaded" answer on purpose, for
// the per-dialect tests of a full engine queue (issue 5: a queue bound, and
// the dialect's own overloaded error with Retry-After).
//
// The server runs with --parallel 1 --queue-max 1: one long streamed
// completion holds the only slot (its first bytes have arrived, so it is
// running), a second one waits in the queue (its response headers arrive
// once it is queued), so the next generation request is refused at once.
// No timing guess: both facts are observed before the probe is sent.
import { startServer } from './server.mjs';
import { makeModelsDir } from './models.mjs';

export const MODEL = 'org/tiny';

// Starts the server; { srv, models, skip }.
export async function startQueueServer() {
  const models = await makeModelsDir();
  if (models.skip) return { skip: models.skip };
  const srv = await startServer({
    args: ['--models-dir', models.dir, '--parallel', '1', '--queue-max', '1', '--default-model', MODEL],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  return { srv, models };
}

export async function stopQueueServer(env) {
  if (env?.srv) await env.srv.stop();
  if (env?.models?.cleanup) env.models.cleanup();
}

// A streamed legacy completion that runs to the 1,024-token context (EOS
// banned): resolves to the response once its headers are in.
function longStream(srv, signal) {
  return fetch(`${srv.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 1000, stream: true, logit_bias: { 2: -100 } }),
    signal,
  });
}

// Fills the slot and the queue; returns release() that ends both.
export async function fillQueue(srv) {
  const ac = new AbortController();
  const running = await longStream(srv, ac.signal);
  if (running.status !== 200) throw new Error(`the running request got ${running.status}: ${await running.text()}`);
  const reader = running.body.getReader();
  await reader.read(); // first bytes: it holds the slot
  const queued = await longStream(srv, ac.signal);
  if (queued.status !== 200) throw new Error(`the queued request got ${queued.status}: ${await queued.text()}`);
  return () => { ac.abort(); reader.cancel().catch(() => {}); queued.body?.cancel().catch(() => {}); };
}
