// bench/streams_client.mjs - N concurrent streamed legacy completions
// (POST /v1/completions, stream: true) through one parley server, timed from
// the client's side, for bench/moe_streams.sh. Not a test.
//   node bench/streams_client.mjs URL MODEL N MAX_TOKENS EOS_ID PROMPT
// Each stream gets PROMPT prefixed by its index (so the prefix cache cannot
// share them) and bans the EOS token with logit_bias, so a random model runs
// to MAX_TOKENS. Prints one JSON line: streams, completion_tokens (the sum of
// the usage figures), span_ms (the earliest stream's first text event to the
// latest one's last), total_tps = sum (completion_tokens - 1) / span (the
// first token of each stream is its prompt's, not decoding), and each
// stream's own decode rate.
import http from 'node:http';

const [url, model, nStr, maxTokens, eosId, prompt] = process.argv.slice(2);
const n = Number(nStr);
const agent = new http.Agent({ keepAlive: true, maxSockets: n });

function one(i) {
  const body = JSON.stringify({
    model, prompt: `${i} ${prompt}`, max_tokens: Number(maxTokens), temperature: 0, stream: true,
    stream_options: { include_usage: true }, logit_bias: { [eosId]: -100 },
  });
  return new Promise((ok, bad) => {
    const req = http.request(new URL('/v1/completions', url), {
      method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      if (res.statusCode !== 200) {
        let e = '';
        res.on('data', (d) => { e += d; });
        res.on('end', () => bad(new Error(`HTTP ${res.statusCode}: ${e}`)));
        return;
      }
      res.setEncoding('utf8');
      let pending = '', first = null, last = null, usage = null;
      res.on('data', (chunk) => {
        const t = process.hrtime.bigint();
        pending += chunk;
        let k;
        while ((k = pending.indexOf('\n\n')) >= 0) {
          const ev = pending.slice(0, k);
          pending = pending.slice(k + 2);
          const line = ev.split('\n').find((l) => l.startsWith('data: '));
          if (!line || line === 'data: [DONE]') continue;
          const j = JSON.parse(line.slice(6));
          if (j.usage) usage = j.usage;
          if (j.choices && j.choices.length && j.choices[0].text) {
            if (first === null) first = t;
            last = t;
          }
        }
      });
      res.on('end', () => ok({ first, last, tokens: usage ? usage.completion_tokens : 0 }));
    });
    req.on('error', bad);
    req.end(body);
  });
}

// connections opened before the clock (GET /health on each socket)
await Promise.all(Array.from({ length: n }, () => new Promise((ok, bad) => {
  http.get(new URL('/health', url), { agent }, (r) => { r.resume(); r.on('end', ok); }).on('error', bad);
})));
const rs = await Promise.all(Array.from({ length: n }, (_, i) => one(i)));
if (rs.some((r) => r.first === null || r.last === r.first)) {
  console.error('streams_client: a stream produced fewer than two text events');
  process.exit(1);
}
const t0 = rs.reduce((a, r) => (r.first < a ? r.first : a), rs[0].first);
const t1 = rs.reduce((a, r) => (r.last > a ? r.last : a), rs[0].last);
const span = Number(t1 - t0) / 1e9;
const dec = rs.reduce((a, r) => a + r.tokens - 1, 0);
console.log(JSON.stringify({
  streams: n, completion_tokens: rs.reduce((a, r) => a + r.tokens, 0), span_ms: span * 1e3,
  total_tps: dec / span,
  stream_tps: rs.map((r) => Number(((r.tokens - 1) / (Number(r.last - r.first) / 1e9)).toFixed(2))),
}));
agent.destroy();
