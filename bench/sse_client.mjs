// bench/sse_client.mjs - one streamed legacy completion (POST /v1/completions,
// stream: true) timed from the client's side, for bench/sse.sh. Not a test.
//   node bench/sse_client.mjs URL MODEL PROMPT MAX_TOKENS
// Prints one JSON line: prompt_tokens, completion_tokens, headers_ms and
// ttft_ms (request written -> response headers / first event carrying
// text), decode_tps (the generation rate the client sees, comparable with
// `parley bench`'s tg, which times forwards only), events.
// decode_tps is (completion_tokens - 1) / (last text event - first text
// event): a byte token that completes no character rides in a later event.
// The EOS token (id 2, llama SPM vocab) is banned with logit_bias so a random
// model runs to max_tokens.
import http from 'node:http';

const [url, model, prompt, maxTokens] = process.argv.slice(2);
const u = new URL('/v1/completions', url);
const body = JSON.stringify({
  model, prompt, max_tokens: Number(maxTokens), temperature: 0, stream: true,
  stream_options: { include_usage: true }, logit_bias: { '2': -100 },
});

// The connection is opened (GET /health) before the clock starts, so the
// time to first token holds no TCP handshake or client start-up.
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
await new Promise((ok, bad) => {
  http.get(new URL('/health', url), { agent }, (r) => { r.resume(); r.on('end', ok); }).on('error', bad);
});
const t0 = process.hrtime.bigint();
const ms = (t) => Number(t - t0) / 1e6;
const req = http.request(u, {
  method: 'POST', agent,
  headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
}, (res) => {
  const tHeaders = process.hrtime.bigint();
  if (res.statusCode !== 200) {
    let e = '';
    res.on('data', (d) => { e += d; });
    res.on('end', () => { console.error(`HTTP ${res.statusCode}: ${e}`); process.exit(1); });
    return;
  }
  res.setEncoding('utf8');
  let pending = '', first = null, last = null, events = 0, usage = null;
  res.on('data', (chunk) => {
    const t = process.hrtime.bigint();
    pending += chunk;
    let i;
    while ((i = pending.indexOf('\n\n')) >= 0) {
      const ev = pending.slice(0, i);
      pending = pending.slice(i + 2);
      const line = ev.split('\n').find((l) => l.startsWith('data: '));
      if (!line || line === 'data: [DONE]') continue;
      const j = JSON.parse(line.slice(6));
      if (j.usage) usage = j.usage;
      if (j.choices && j.choices.length && j.choices[0].text !== undefined && j.choices[0].text !== '') {
        if (first === null) first = t;
        last = t;
        events++;
      }
    }
  });
  res.on('end', () => {
    const out = {
      prompt_tokens: usage?.prompt_tokens, completion_tokens: usage?.completion_tokens,
      headers_ms: ms(tHeaders), ttft_ms: first === null ? null : ms(first),
      decode_tps: events > 1 && usage ? (usage.completion_tokens - 1) / (Number(last - first) / 1e9) : null,
      events,
    };
    console.log(JSON.stringify(out));
    agent.destroy();
  });
});
req.on('error', (e) => { console.error(e.message); process.exit(1); });
req.end(body);
