// lib.mjs - plain-HTTP helpers for the LM Studio tests: LM Studio's own
// REST API has no official JS client (lmstudio-js speaks a WebSocket RPC),
// so the tests use fetch the way Zed and other tools do.
import assert from 'node:assert/strict';
import { parseSSE } from '../lib/server.mjs';

export function client(url) {
  const req = async (method, path, body) => {
    const r = await fetch(url + path, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)),
    });
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* SSE or plain text */ }
    return { status: r.status, type: r.headers.get('content-type') || '', text, json, headers: r.headers };
  };
  return {
    get: (p) => req('GET', p),
    post: (p, b) => req('POST', p, b),
    // POST and parse the answer as SSE: [{event, data(parsed JSON or the raw string)}]
    async sse(p, b) {
      const r = await req('POST', p, b);
      assert.match(r.type, /^text\/event-stream/, `not a stream: ${r.status} ${r.text.slice(0, 300)}`);
      const events = parseSSE(r.text).events.map((e) => {
        let data = e.data;
        try { data = JSON.parse(e.data); } catch { /* [DONE] */ }
        return { event: e.event, data };
      });
      return { ...r, events };
    },
  };
}

// The LM Studio error object: {"error":{"type","message",...}} with a
// non-2xx status; returns the inner object.
export function assertError(r, status, { type, param } = {}) {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${r.text.slice(0, 300)}`);
  assert.ok(r.json && typeof r.json.error === 'object', `no error object: ${r.text.slice(0, 300)}`);
  assert.equal(typeof r.json.error.message, 'string');
  assert.ok(r.json.error.message.length > 0);
  assert.equal(typeof r.json.error.type, 'string');
  if (type) assert.equal(r.json.error.type, type, r.text);
  if (param) assert.equal(r.json.error.param, param, r.text);
  return r.json.error;
}
