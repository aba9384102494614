// server.mjs - starts the real parley binary on a free loopback port for a
// test file and stops it afterwards. The binary prints
// "listening on http://HOST:PORT" on stdout once it accepts connections.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const BIN = process.env.PARLEY_BIN || path.resolve(here, '../../../build/parley');

// Starts `parley serve` with extra flags and environment. Resolves to
// { url, port, host, proc, stop(), log() }.
export async function startServer({ args = [], env = {}, host = '127.0.0.1' } = {}) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'parley-api-'));
  const proc = spawn(BIN, ['serve', '--host', host, '--port', '0', '--data-dir', dataDir, ...args], {
    env: { ...process.env, PARLEY_API_KEY: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    // A server that misses the deadline is killed, not left behind holding
    // its port and files. PARLEY_START_TIMEOUT_MS lengthens it (the
    // ThreadSanitizer build starts ~10x slower on a loaded machine).
    const ms = Number(process.env.PARLEY_START_TIMEOUT_MS || 10000);
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
      reject(new Error(`parley did not start in ${ms / 1000} s:\n${stderr}`));
    }, ms);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/[^\s]*:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`parley exited with ${code}:\n${stderr}`)); });
  });
  const url = `http://${host}:${port}`;
  return {
    url, port, host, proc, dataDir,
    log: () => stderr,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once('exit', (code, sig) => r({ code, sig })));
        proc.kill('SIGTERM');
        const res = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 10000))]);
        if (!res) { proc.kill('SIGKILL'); throw new Error('parley did not stop within 10 s of SIGTERM'); }
      }
      rmSync(dataDir, { recursive: true, force: true });
      return proc.exitCode;
    },
  };
}

// Runs the binary to completion (for CLI checks): { code, stdout, stderr }.
export function runCli(args, env = {}) {
  return new Promise((resolve) => {
    const p = spawn(BIN, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

// Sends raw bytes on a TCP connection and collects the reply until the server
// closes or `ms` elapse. Used for requests no HTTP client will send.
import net from 'node:net';
export function rawRequest(port, chunks, { ms = 5000, gapMs = 0 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let closed = false;
    const done = () => { if (!closed) { closed = true; sock.destroy(); resolve({ text: data.toString('latin1'), closedByServer: sock.readableEnded }); } };
    sock.on('data', (d) => { data = Buffer.concat([data, d]); });
    sock.on('end', () => { setTimeout(done, 10); });
    sock.on('error', done);
    const timer = setTimeout(done, ms);
    sock.on('close', () => { clearTimeout(timer); done(); });
    sock.on('connect', async () => {
      for (const c of chunks) {
        if (sock.destroyed) break;
        sock.write(typeof c === 'string' ? Buffer.from(c, 'latin1') : c); // strings are bytes here
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

// Parses an SSE body into [{event, data}] following the WHATWG rules the SDKs use.
export function parseSSE(text) {
  const events = [];
  const comments = [];
  for (const block of text.split(/\r\n\r\n|\n\n|\r\r/)) {
    if (!block.trim()) continue;
    let event = null; const data = [];
    for (const line of block.split(/\r\n|\n|\r/)) {
      if (line.startsWith(':')) { comments.push(line); continue; }
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (event !== null || data.length) events.push({ event, data: data.join('\n') });
  }
  return { events, comments };
}
