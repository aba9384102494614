// bench/listen_latency.mjs - issue 8's live-listen figure: from the client's
// Finalize to the final Results carrying from_finalize, over Deepgram's live
// /listen WebSocket. Each run opens a socket (endpointing=false, so only
// Finalize ends the utterance), streams a 16 kHz WAV (header in the first
// frame, no `encoding`) in 100 ms chunks at real time, sends Finalize right
// after the last chunk and waits for the from_finalize final. Not a test.
//   node bench/listen_latency.mjs [URL] [RUNS=5] [WAV...]
// Without URL (or with '-') it starts build/parley on a free port. Default
// audio: the pocketsphinx-testdata recordings goforward.raw (wrapped in a
// WAV header, 2.8 s) and librivox 0870 (7.1 s). Prints every run and the
// median per file.
import fs from 'node:fs';
import WebSocket from '../tests/api/node_modules/ws/wrapper.mjs';
import { startServer } from '../tests/api/lib/server.mjs';

const DATA = '/usr/share/pocketsphinx/test/data';
const [urlArg, runsArg, ...files] = process.argv.slice(2);
const runs = Number(runsArg || 5);
const wavs = files.length ? files : [`${DATA}/goforward.raw`, `${DATA}/librivox/sense_and_sensibility_01_austen_64kb-0870.wav`];

function wavOf(pcm, rate = 16000) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0); h.writeUInt32LE(36 + pcm.length, 4); h.write('WAVE', 8); h.write('fmt ', 12);
  h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(1, 22); h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28); h.writeUInt16LE(2, 32); h.writeUInt16LE(16, 34); h.write('data', 36);
  h.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([h, pcm]);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One run: returns {ms, transcript, audioS}.
async function once(base, wav) {
  const ws = new WebSocket(`${base}?model=nova-3&endpointing=false&interim_results=false`, { headers: { Authorization: 'Token k' } });
  await new Promise((res, rej) => { ws.on('open', res); ws.on('error', rej); });
  let fin = null, t0 = 0;
  const got = new Promise((res, rej) => {
    ws.on('message', (d, bin) => {
      if (bin) return;
      const m = JSON.parse(d.toString());
      if (m.type === 'Results' && m.from_finalize) { fin = { at: performance.now(), m }; res(); }
    });
    ws.on('close', () => rej(new Error('closed before the from_finalize final')));
  });
  // 100 ms of 16 kHz int16 = 3200 bytes; the 44-byte header rides on the first chunk
  const start = performance.now();
  for (let off = 0, i = 0; off < wav.length; off += 3200, i++) {
    const end = off === 0 ? 3244 : off + 3200;
    ws.send(wav.subarray(off, Math.min(end, wav.length)));
    if (off === 0) off += 44;
    const due = start + (i + 1) * 100;
    const now = performance.now();
    if (due > now) await sleep(due - now);
  }
  t0 = performance.now();
  ws.send(JSON.stringify({ type: 'Finalize' }));
  await got;
  ws.send(JSON.stringify({ type: 'CloseStream' }));
  await new Promise((r) => ws.on('close', r));
  return { ms: fin.at - t0, transcript: fin.m.channel.alternatives[0].transcript, audioS: (wav.length - 44) / 32000 };
}

let srv = null, base;
if (!urlArg || urlArg === '-') {
  srv = await startServer();
  base = `ws://127.0.0.1:${srv.port}/deepgram/v1/listen`;
} else {
  base = `${urlArg.replace(/^http/, 'ws').replace(/\/$/, '')}/deepgram/v1/listen`;
}
try {
  for (const f of wavs) {
    const raw = fs.readFileSync(f);
    const wav = f.endsWith('.raw') ? wavOf(raw) : raw;
    await once(base, wav); // warm-up: the pooled decoder exists afterwards
    const res = [];
    for (let i = 0; i < runs; i++) {
      const r = await once(base, wav);
      res.push(r.ms);
      console.log(`${f.split('/').pop()} (${r.audioS.toFixed(1)} s) run ${i + 1}: Finalize -> final ${r.ms.toFixed(1)} ms "${r.transcript}"`);
    }
    res.sort((a, b) => a - b);
    console.log(`${f.split('/').pop()}: median ${res[Math.floor(res.length / 2)].toFixed(1)} ms (min ${res[0].toFixed(1)}, max ${res[res.length - 1].toFixed(1)}) over ${runs} runs; target < 300 ms`);
  }
} finally {
  if (srv) await srv.stop();
}
