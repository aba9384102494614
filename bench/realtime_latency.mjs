// bench/realtime_latency.mjs - issue 9's latency figure: from the end of the
// user's speech (the last speech sample streamed in real time) to the first
// response audio byte, through a Realtime WebSocket session with server VAD
// (silence 500 ms), transcription, the model's answer and TTS. Node, run
// from tests/api (it uses the tests' Realtime client and the pinned `ws`):
//   node ../../bench/realtime_latency.mjs URL MODEL [RUNS=5]
// Prints each run and the median. Not part of the tests.
import { connect, speechPcm24k, streamPcm } from '../tests/api/realtime/rt.mjs';

const [url, model, runsArg] = process.argv.slice(2);
const runs = Number(runsArg || 5);
const pcm = speechPcm24k({ leadMs: 400, tailMs: 2500 });
if (!pcm) { console.error('needs pocketsphinx-testdata (goforward.raw)'); process.exit(1); }
const res = [];
for (let i = 0; i < runs; i++) {
  const c = await connect(url, { query: `model=${encodeURIComponent(model)}` });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['audio'], max_output_tokens: 24,
    audio: { input: { transcription: { model: 'whisper-1' },
      turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500, create_response: true } },
    output: { voice: 'alloy' } } } });
  await c.waitFor('session.updated');
  const from = c.events.length;
  const sent = await streamPcm(c, pcm, { chunkMs: 20, realTime: true });
  // End of speech: audio_end_ms (as OpenAI defines it) includes the 500 ms
  // of silence the VAD waits for; the last voiced audio is 500 ms earlier.
  // Both are reported, as the wall time the chunk holding them was sent.
  const stopped = await c.waitFor('input_audio_buffer.speech_stopped', { from, ms: 30000 });
  const audio = await c.waitFor('response.output_audio.delta', { from, ms: 300000 })
    .catch(() => c.waitFor('response.audio.delta', { from, ms: 1 }));
  await c.waitFor('response.done', { from, ms: 300000 });
  const vadEnd = sent[Math.min(sent.length - 1, Math.floor(stopped.audio_end_ms / 20))];
  const speechEnd = sent[Math.min(sent.length - 1, Math.floor((stopped.audio_end_ms - 500) / 20))];
  const ms = audio.receivedAt - speechEnd;
  res.push(ms);
  console.log(`run ${i + 1}: last speech -> first audio byte ${ms.toFixed(0)} ms (VAD decision -> audio ${(audio.receivedAt - vadEnd).toFixed(0)} ms)`);
  c.close();
}
res.sort((a, b) => a - b);
console.log(`median last speech -> first audio byte ${res[Math.floor(res.length / 2)].toFixed(0)} ms over ${runs} runs (target < 800 ms, 1.1B Q4_K_M on 2 cores)`);
