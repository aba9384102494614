// bench/soak.mjs - mixed load against a running parley for a fixed time,
// with the server's resident memory sampled, to show that nothing grows
// under a long run (issue #25 item 13). Started by bench/soak.sh, which
// owns the server and the models; not part of the tests.
//
//   node bench/soak.mjs URL PID SECONDS CHAT_MODEL EMBED_MODEL
//
// Load, each kind a loop of its own running until the time is up:
//   - chat streams: the official openai SDK, stream: true, to the end
//   - cancelled chat streams: aborted after the first delta (the slot must
//     be freed and the connection closed without leaking the job)
//   - embeddings: a batch of inputs per request
//   - uploads: files.create of a 64-256 KiB file, then files.del
//   - WebSockets: Deepgram /v1/speak, Speak + Flush read to Flushed, then
//     Close; every third socket is dropped mid-synthesis instead
// SOAK_KINDS=chat,cancel,embed,upload,ws picks the loops (default all).
// RSS is read from /proc/PID/status (and the heap split from /metrics) every SAMPLE_MS (env SOAK_SAMPLE_MS,
// default 5000). The slope is a least-squares fit over the samples after
// the warm-up (the first fifth of the run, at least 60 s: allocator arenas,
// the prefix cache and SQLite's page cache fill there). Prints one JSON line
// with the counts per kind, errors, the fit (MiB per hour and its standard
// error) and a verdict: flat when the growth per hour is not shown, at two
// standard errors, to exceed SOAK_MAX_MIB_PER_HOUR (default 16).
// Exits 1 when not flat, when any request failed unexpectedly or the server
// stopped answering /health.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const req = createRequire(new URL('../tests/api/package.json', import.meta.url));
const OpenAI = req('openai').default ?? req('openai');
const { toFile } = req('openai');
const WebSocket = req('ws');

const [url, pidArg, secsArg, chatModel, embedModel] = process.argv.slice(2);
if (!url || !pidArg || !secsArg || !chatModel || !embedModel) {
  console.error('usage: node bench/soak.mjs URL PID SECONDS CHAT_MODEL EMBED_MODEL');
  process.exit(2);
}
const pid = Number(pidArg), secs = Number(secsArg);
const sampleMs = Number(process.env.SOAK_SAMPLE_MS || 5000);
const maxPerHour = Number(process.env.SOAK_MAX_MIB_PER_HOUR || 16);
const deadline = Date.now() + secs * 1000;
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sk-soak', maxRetries: 0, timeout: 120000 });
const port = new URL(url).port;

const counts = { chat: 0, chat_cancelled: 0, embed: 0, upload: 0, ws: 0, ws_dropped: 0 };
const errors = [];
const fail = (kind, e) => { if (errors.length < 20) errors.push(`${kind}: ${e?.message ?? e}`); };

const words = 'the quick brown fox jumps over the lazy dog while seven small birds sing'.split(' ');
let seq = 0;
const prompt = () => { seq++; return `${seq} ${words.slice(seq % 7).join(' ')}`; };

async function chatStream() {
  const s = await client.chat.completions.create({
    model: chatModel, stream: true, max_tokens: 48,
    messages: [{ role: 'user', content: prompt() }],
  });
  let n = 0;
  for await (const ch of s) if (ch.choices?.[0]?.delta) n++;
  if (!n) throw new Error('stream with no deltas');
  counts.chat++;
}

async function chatCancel() {
  const ac = new AbortController();
  const s = await client.chat.completions.create({
    model: chatModel, stream: true, max_tokens: 400,
    messages: [{ role: 'user', content: prompt() }],
  }, { signal: ac.signal });
  try {
    for await (const ch of s) { if (ch.choices?.[0]?.delta) { ac.abort(); } }
  } catch (e) {
    if (e.name !== 'AbortError' && !/abort/i.test(e.message)) throw e;
  }
  counts.chat_cancelled++;
}

async function embed() {
  const input = Array.from({ length: 8 }, () => prompt());
  const r = await client.embeddings.create({ model: embedModel, input });
  if (r.data.length !== input.length || !r.data[0].embedding.length) throw new Error('wrong embedding count');
  counts.embed++;
}

async function upload() {
  const size = 65536 + (seq++ % 4) * 65536;
  const f = await client.files.create({ file: await toFile(Buffer.alloc(size, 0x61 + (seq % 26)), `soak-${seq}.jsonl`), purpose: 'batch' });
  if (f.bytes !== size) throw new Error(`uploaded ${size} bytes, file says ${f.bytes}`);
  await client.files.delete(f.id);
  counts.upload++;
}

let nWs = 0;
function speakWs() {
  const drop = nWs++ % 3 === 2;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/deepgram/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate=16000`,
      { headers: { Authorization: 'Token soak' } });
    let bytes = 0, done = false;
    const timer = setTimeout(() => finish(new Error('speak socket: no Flushed in 60 s')), 60000);
    const finish = (e) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (e) { ws.terminate(); reject(e); } else resolve();
    };
    ws.on('open', () => {
      ws.send(JSON.stringify({ type: 'Speak', text: `${prompt()}. And then a second sentence to speak.` }));
      ws.send(JSON.stringify({ type: 'Flush' }));
    });
    ws.on('message', (d, bin) => {
      if (bin) {
        bytes += d.length;
        if (drop && !done) { ws.terminate(); counts.ws_dropped++; finish(); }
        return;
      }
      const m = JSON.parse(d.toString());
      if (m.type === 'Flushed') {
        if (!bytes) return finish(new Error('Flushed before any audio'));
        ws.send(JSON.stringify({ type: 'Close' }));
      }
    });
    ws.on('close', (code) => {
      if (done) return;
      if (code !== 1000) return finish(new Error(`speak socket closed ${code}`));
      counts.ws++;
      finish();
    });
    ws.on('error', (e) => finish(e));
    ws.on('unexpected-response', (r, res) => finish(new Error(`speak upgrade HTTP ${res.statusCode}`)));
  });
}

async function loop(kind, fn) {
  while (Date.now() < deadline) {
    try { await fn(); } catch (e) { fail(kind, e); await new Promise((r) => setTimeout(r, 500)); }
  }
}

function rssKiB() {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return m ? Number(m[1]) : NaN;
}

// [seconds since start, RSS MiB, heap in use MiB, heap free MiB]: the
// heap split from /metrics tells a structure that grows (in use) from
// memory the allocator keeps (free).
const samples = [];
const t0 = Date.now();
async function heapMiB() {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const g = (name) => Number((text.match(new RegExp(`^${name} (\\d+)`, 'm')) || [])[1]) / 1048576;
    return [g('parley_heap_in_use_bytes'), g('parley_heap_free_bytes')];
  } catch (e) { fail('metrics', e); return [NaN, NaN]; }
}
async function sample() {
  const t = (Date.now() - t0) / 1000, rss = rssKiB() / 1024;
  samples.push([t, rss, ...(await heapMiB())]);
}
const sampler = setInterval(() => { sample().catch((e) => fail('rss', e)); }, sampleMs);
await sample();

// SOAK_KINDS (comma-separated, default all) runs only some loops, to find
// which load kind a growth comes from.
const LOOPS = {
  chat: () => [loop('chat', chatStream), loop('chat', chatStream)],
  cancel: () => [loop('chat_cancelled', chatCancel)],
  embed: () => [loop('embed', embed)],
  upload: () => [loop('upload', upload)],
  ws: () => [loop('ws', speakWs)],
};
const kinds = (process.env.SOAK_KINDS || Object.keys(LOOPS).join(',')).split(',').map((k) => k.trim()).filter(Boolean);
for (const k of kinds) if (!LOOPS[k]) { console.error(`soak: unknown SOAK_KINDS entry ${k} (${Object.keys(LOOPS).join(', ')})`); process.exit(2); }
await Promise.all(kinds.flatMap((k) => LOOPS[k]()));
clearInterval(sampler);
await sample();

// Least squares over the samples after the warm-up, with the slope's
// standard error from the residuals; col picks the series.
const warm = Math.max(60, secs / 5);
const pts = samples.filter(([t]) => t >= warm);
const n = pts.length;
function fit(col) {
  const p = pts.filter((r) => Number.isFinite(r[col]));
  const k = p.length;
  if (k < 3) return { perHour: NaN, sePerHour: Infinity };
  const mx = p.reduce((a, r) => a + r[0], 0) / k, my = p.reduce((a, r) => a + r[col], 0) / k;
  let sxy = 0, sxx = 0;
  for (const r of p) { sxy += (r[0] - mx) * (r[col] - my); sxx += (r[0] - mx) ** 2; }
  const slope = sxx ? sxy / sxx : 0; // MiB per second
  let ssr = 0;
  for (const r of p) ssr += (r[col] - (my + slope * (r[0] - mx))) ** 2;
  const se = sxx ? Math.sqrt(ssr / (k - 2) / sxx) : Infinity;
  return { perHour: slope * 3600, sePerHour: se * 3600 };
}
const { perHour, sePerHour } = fit(1);
const inUse = fit(2), free = fit(3);
let health = 0;
try { health = (await fetch(`${url}/health`)).status; } catch (e) { fail('health', e); }

const out = {
  seconds: secs, samples: samples.length, warmup_s: warm,
  rss_mib: { start: +samples[0][1].toFixed(1), after_warmup: +(pts[0]?.[1] ?? NaN).toFixed(1),
    end: +samples[samples.length - 1][1].toFixed(1), max: +Math.max(...samples.map((s) => s[1])).toFixed(1) },
  slope_mib_per_hour: +perHour.toFixed(2), slope_se_mib_per_hour: +sePerHour.toFixed(2), max_mib_per_hour: maxPerHour,
  heap_in_use_mib_per_hour: +inUse.perHour.toFixed(2), heap_in_use_se: +inUse.sePerHour.toFixed(2),
  heap_free_mib_per_hour: +free.perHour.toFixed(2), heap_free_se: +free.sePerHour.toFixed(2),
  heap_mib_end: { in_use: +samples[samples.length - 1][2].toFixed(1), free: +samples[samples.length - 1][3].toFixed(1) },
  kinds, counts, errors, health,
};
// Flat: the growth is not shown, at two standard errors, to exceed the
// limit. A short run's noise (a few MiB of allocator churn) leaves a wide
// error; the default 30 minutes narrows it to well under the limit.
const flat = n >= 3 && perHour - 2 * sePerHour <= maxPerHour;
out.verdict = flat && !errors.length && health === 200 ? 'flat' : (flat ? 'errors' : 'growing');
console.log(JSON.stringify(out));
if (process.env.SOAK_SAMPLES) console.error(samples.map((r) => `${r[0].toFixed(0)} ${r.slice(1).map((v) => v.toFixed(2)).join(' ')}`).join('\n'));
process.exit(out.verdict === 'flat' ? 0 : 1);
