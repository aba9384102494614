// bench/hybrid_chat.mjs - a 10-turn chat against a hybrid (recurrent) model,
// with and without recurrent-state checkpoints (--rs-checkpoints), to show
// what the prefix cache saves when a client re-sends its history each turn
// (issue #30 item 2). Started by bench/hybrid_chat.sh, which makes the
// model; not part of the tests.
//
//   node bench/hybrid_chat.mjs MODELS_DIR MODEL [CHECKPOINTS=8,0]
//
// For each checkpoint count, a fresh server (one slot, so every turn meets
// the previous turn's state) runs the same conversation: a system prompt,
// then per turn a user message of about 40 tokens, a streamed greedy answer
// of at most 16 tokens through the openai SDK, and that answer appended as
// the assistant's message (as text: the client re-sends what it received).
// Per turn it records the prompt and cached tokens (usage.prompt_tokens_
// details.cached_tokens) and the time to the first streamed chunk with
// content. Prints one JSON line per run: the per-turn figures, the hit rate
// over turns 2-10 (cached / prompt tokens) and the mean TTFT of turns 2-10.
import { createRequire } from 'node:module';
import { startServer } from '../tests/api/lib/server.mjs';

const req = createRequire(new URL('../tests/api/package.json', import.meta.url));
const OpenAI = req('openai').default ?? req('openai');

const [dir, model, cpsArg] = process.argv.slice(2);
if (!dir || !model) {
  console.error('usage: node bench/hybrid_chat.mjs MODELS_DIR MODEL [CHECKPOINTS=8,0]');
  process.exit(2);
}
const counts = (cpsArg ?? '8,0').split(',').map(Number);
const TURNS = 10;
const topics = ['rivers', 'bridges', 'lighthouses', 'orchards', 'glaciers', 'markets', 'libraries', 'harbours',
  'deserts', 'observatories'];
const user = (i) => `Turn ${i + 1}. Tell me three short facts about ${topics[i]}, how they change over the seasons, ` +
  `and what a visitor should bring when going to see ${topics[i]} for the first time, in plain words.`;

async function run(cps) {
  const srv = await startServer({
    args: ['--models-dir', dir, '--parallel', '1', '--rs-checkpoints', String(cps)],
    env: { PARLEY_NO_EXTERNAL_MODELS: '1' },
  });
  try {
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 600000 });
    // load the model (not timed)
    await client.chat.completions.create({ model, max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] });
    const messages = [{ role: 'system', content: 'You are a helpful assistant who answers briefly.' }];
    const turns = [];
    for (let i = 0; i < TURNS; i++) {
      messages.push({ role: 'user', content: user(i) });
      const t0 = performance.now();
      let ttft = null, text = '', usage = null;
      const stream = await client.chat.completions.create({
        model, messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true },
      });
      for await (const ch of stream) {
        const d = ch.choices?.[0]?.delta?.content;
        if (d) {
          if (ttft === null) ttft = performance.now() - t0;
          text += d;
        }
        if (ch.usage) usage = ch.usage;
      }
      const total = performance.now() - t0;
      turns.push({
        turn: i + 1, prompt: usage.prompt_tokens, cached: usage.prompt_tokens_details?.cached_tokens ?? 0,
        ttft_ms: Math.round(ttft ?? total), total_ms: Math.round(total),
      });
      messages.push({ role: 'assistant', content: text });
    }
    const later = turns.slice(1);
    const sum = (k) => later.reduce((s, t) => s + t[k], 0);
    return {
      checkpoints: cps, turns, hit_rate: +(sum('cached') / sum('prompt')).toFixed(3),
      mean_ttft_ms_2_10: Math.round(sum('ttft_ms') / later.length),
    };
  } finally {
    await srv.stop();
  }
}

for (const c of counts) console.log(JSON.stringify(await run(c)));
