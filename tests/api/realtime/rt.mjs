// rt.mjs - a small Realtime client for the tests, on the pinned `ws` package
// (the official SDK's OpenAIRealtimeWS always dials wss:, and these tests
// run the server over plain HTTP). It records every server event in order
// and lets a test wait for one by type.
import { readFileSync, existsSync } from 'node:fs';
import WebSocket from 'ws';

export const GOFORWARD = '/usr/share/pocketsphinx/test/data/goforward.raw';

// Opens ws://.../v1/realtime?<query> and resolves once it is open.
// Rejects with { status, body } when the handshake is refused.
export function connect(baseUrl, { query = '', headers = {}, protocols } = {}) {
  const url = baseUrl.replace(/^http/, 'ws') + '/v1/realtime' + (query ? `?${query}` : '');
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers });
    const c = new Client(ws);
    ws.once('open', () => resolve(c));
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => reject(Object.assign(new Error(`handshake refused: ${res.statusCode}`),
        { status: res.statusCode, body: body ? JSON.parse(body) : null })));
    });
    ws.once('error', (e) => reject(e));
  });
}

export class Client {
  constructor(ws) {
    this.ws = ws;
    this.events = [];
    this.waiters = [];
    ws.on('message', (data) => {
      const ev = JSON.parse(String(data));
      Object.defineProperty(ev, 'receivedAt', { value: performance.now(), enumerable: false });
      this.events.push(ev);
      this.waiters = this.waiters.filter((w) => {
        if (w.pred(ev)) { clearTimeout(w.timer); w.resolve(ev); return false; }
        return true;
      });
    });
  }
  get protocol() { return this.ws.protocol; }
  send(ev) { this.ws.send(typeof ev === 'string' ? ev : JSON.stringify(ev)); }
  // Resolves with the first event (seen already from index `from`, or to come)
  // whose type is `type` and that passes pred.
  waitFor(type, { pred = () => true, from = 0, ms = 60000 } = {}) {
    const match = (ev) => ev.type === type && pred(ev);
    const seen = this.events.slice(from).find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${type} within ${ms} ms; got: ${
        this.events.map((e) => e.type).join(', ')}`)), ms);
      this.waiters.push({ pred: match, resolve, timer });
    });
  }
  types(from = 0) { return this.events.slice(from).map((e) => e.type); }
  close() { this.ws.close(1000); }
}

// pocketsphinx's test recording ("go forward ten meters", 16 kHz) as 24 kHz
// pcm16 with silence around it, or null when the package is missing.
export function speechPcm24k({ leadMs = 400, tailMs = 1500 } = {}) {
  if (!existsSync(GOFORWARD)) return null;
  const raw = readFileSync(GOFORWARD);
  const n16 = raw.length / 2;
  const src = new Int16Array(n16);
  for (let i = 0; i < n16; i++) src[i] = raw.readInt16LE(2 * i);
  const n24 = Math.floor(n16 * 1.5);
  const lead = 24 * leadMs, tail = 24 * tailMs;
  const out = Buffer.alloc(2 * (lead + n24 + tail));
  for (let i = 0; i < n24; i++) {
    const x = i / 1.5, k = Math.floor(x), f = x - k;
    const a = src[k], b = src[Math.min(k + 1, n16 - 1)];
    out.writeInt16LE(Math.round(a + (b - a) * f), 2 * (lead + i));
  }
  return out;
}

// Sends pcm as input_audio_buffer.append events of chunkMs each; with
// realTime, one chunk per chunkMs of wall time. Returns the send time
// (performance.now()) of each chunk.
export async function streamPcm(c, pcm, { chunkMs = 20, rate = 24000, realTime = false } = {}) {
  const step = (rate / 1000) * chunkMs * 2;
  const sent = [];
  const t0 = performance.now();
  for (let off = 0, i = 0; off < pcm.length; off += step, i++) {
    c.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(off, off + step).toString('base64') });
    sent.push(performance.now());
    if (realTime) await new Promise((r) => setTimeout(r, Math.max(0, t0 + (i + 1) * chunkMs - performance.now())));
  }
  return sent;
}
