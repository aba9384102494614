// fakehub.mjs - a loopback stand-in for the Hugging Face hub and the Ollama
// registry, serving a model the test generated, so that `parley pull` can be
// tested without the network. Point parley at it with
//   HF_ENDPOINT=<url> PARLEY_OLLAMA_REGISTRY=<url>
//
// Hugging Face (the endpoints parley uses):
//   GET /api/models/OWNER/REPO/tree/main?recursive=true  -> [{type,path,size,oid,lfs:{oid,size,pointerSize}}]
//   GET /api/models/OWNER/REPO?blobs=true -> {id, siblings:[{rfilename,size,lfs:{sha256,size}}]}
//       (what parley asks when the tree answers 404; hub.noTree = true makes it)
//   GET /OWNER/REPO/resolve/main/FILE -> 302 to /cdn/<sha256> (x-linked-etag, x-linked-size), as the hub does
// Ollama registry:
//   GET /v2/NAMESPACE/MODEL/manifests/TAG -> Docker v2 manifest with ollama layers
//   GET /v2/NAMESPACE/MODEL/blobs/sha256:HEX
// Blobs honour `Range: bytes=N-` (206 + Content-Range; 416 past the end).
//
// Faults, set with hub.fault = { mode, match, after, chunk, delayMs }:
//   '404' | '500'  the matching requests fail with that status
//   'digest'       blob bytes served with one byte flipped (same size)
//   'drop'         headers announce the full length, `after` bytes are sent, the socket is destroyed
//   'short'        only `after` bytes are sent, with a Content-Length that says so
//   'slow'         bytes trickle out (`chunk` bytes every `delayMs`)
// `match` (a RegExp, default: blob and file downloads) selects the requests.
// hub.listingWithoutLfs = true leaves lfs.oid out of the HF listing, so the
// only digest is the resolve response's x-linked-etag.
// hub.requests records every request: { method, url, range }.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';

const sha256 = (b) => createHash('sha256').update(b).digest('hex');

export async function startFakeHub({ modelPath, hfRepo = 'acme/tiny-GGUF', ollamaModel = 'library/tiny',
  ollamaTags = ['latest', '1b'], template = '{{ .Prompt }}' } = {}) {
  const model = readFileSync(modelPath);
  const blobs = new Map(); // hex -> Buffer
  const add = (buf) => { const h = sha256(buf); blobs.set(h, buf); return h; };
  const modelSha = add(model);
  const tmplBuf = Buffer.from(template);
  const tmplSha = add(tmplBuf);
  const params = Buffer.from(JSON.stringify({ stop: ['</s>'] }));
  const paramsSha = add(params);
  const config = Buffer.from(JSON.stringify({ model_format: 'gguf', model_family: 'llama' }));
  const configSha = add(config);

  const hfFiles = [
    { path: 'README.md', buf: Buffer.from('# tiny\n'), lfs: false },
    { path: 'tiny-Q4_K_M.gguf', buf: model, lfs: true },
    { path: 'tiny-Q8_0.gguf', buf: model, lfs: true },
  ];
  for (const f of hfFiles) f.sha = add(f.buf);

  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: `sha256:${configSha}`, size: config.length },
    layers: [
      { mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${modelSha}`, size: model.length },
      { mediaType: 'application/vnd.ollama.image.template', digest: `sha256:${tmplSha}`, size: tmplBuf.length },
      { mediaType: 'application/vnd.ollama.image.params', digest: `sha256:${paramsSha}`, size: params.length },
    ],
  });

  const hub = {
    fault: null,
    listingWithoutLfs: false,
    noTree: false,
    requests: [],
    modelSha,
    modelSize: model.length,
    hfRepo,
    ollamaModel,
    url: '',
  };

  const faultFor = (url) => {
    const f = hub.fault;
    if (!f) return null;
    const re = f.match || /\/(blobs\/sha256:|cdn\/)/;
    return re.test(url) ? f : null;
  };

  function sendBlob(req, res, buf, fault) {
    let body = buf;
    if (fault && fault.mode === 'digest') {
      body = Buffer.from(buf);
      body[body.length >> 1] ^= 0xff;
    }
    let start = 0;
    const range = req.headers.range;
    if (range) {
      const m = /^bytes=(\d+)-(\d*)$/.exec(range);
      if (!m) { res.writeHead(416).end(); return; }
      start = Number(m[1]);
      if (start >= body.length) {
        res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end();
        return;
      }
    }
    const part = body.subarray(start);
    const headers = { 'Content-Type': 'application/octet-stream', 'Accept-Ranges': 'bytes' };
    const status = range ? 206 : 200;
    if (range) headers['Content-Range'] = `bytes ${start}-${body.length - 1}/${body.length}`;
    if (fault && fault.mode === 'short') {
      const n = Math.min(fault.after ?? 1000, part.length);
      headers['Content-Length'] = n;
      res.writeHead(status, headers);
      res.end(part.subarray(0, n));
      return;
    }
    headers['Content-Length'] = part.length;
    res.writeHead(status, headers);
    if (fault && fault.mode === 'drop') {
      const n = Math.min(fault.after ?? 1000, part.length - 1);
      res.write(part.subarray(0, n), () => setTimeout(() => res.socket?.destroy(), 50));
      return;
    }
    if (fault && fault.mode === 'slow') {
      const chunk = fault.chunk ?? 65536, delay = fault.delayMs ?? 50;
      let off = 0;
      const tick = () => {
        if (res.destroyed || res.socket?.destroyed) return;
        if (off >= part.length) { res.end(); return; }
        const next = part.subarray(off, off + chunk);
        off += next.length;
        res.write(next);
        setTimeout(tick, delay);
      };
      res.on('close', () => { off = part.length + 1; });
      tick();
      return;
    }
    res.end(part);
  }

  const server = http.createServer((req, res) => {
    const url = req.url;
    hub.requests.push({ method: req.method, url, range: req.headers.range || null });
    const fault = faultFor(url);
    if (fault && (fault.mode === '404' || fault.mode === '500')) {
      res.writeHead(Number(fault.mode), { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: fault.mode === '404' ? 'not found' : 'internal error' }));
      return;
    }
    const u = new URL(url, 'http://x');
    const p = decodeURIComponent(u.pathname);
    let m;
    // Hugging Face
    if ((m = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/main$/.exec(p))) {
      if (m[1] !== hfRepo || hub.noTree) { res.writeHead(404).end('{"error":"Repository not found"}'); return; }
      const list = hfFiles.map((f) => ({
        type: 'file', path: f.path, size: f.buf.length, oid: f.sha.slice(0, 40),
        ...(f.lfs && !hub.listingWithoutLfs ? { lfs: { oid: f.sha, size: f.buf.length, pointerSize: 134 } } : {}),
      }));
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(list));
      return;
    }
    if ((m = /^\/api\/models\/([^/]+\/[^/]+)$/.exec(p))) {
      if (m[1] !== hfRepo) { res.writeHead(404).end('{"error":"Repository not found"}'); return; }
      const siblings = hfFiles.map((f) => ({
        rfilename: f.path, size: f.buf.length,
        ...(f.lfs && !hub.listingWithoutLfs ? { lfs: { sha256: f.sha, size: f.buf.length, pointerSize: 134 } } : {}),
      }));
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ id: hfRepo, siblings }));
      return;
    }
    if ((m = /^\/([^/]+\/[^/]+)\/resolve\/main\/(.+)$/.exec(p))) {
      const f = m[1] === hfRepo && hfFiles.find((x) => x.path === m[2]);
      if (!f) { res.writeHead(404).end('Entry not found'); return; }
      res.writeHead(302, { Location: `/cdn/${f.sha}`, 'x-linked-etag': `"${f.sha}"`, 'x-linked-size': String(f.buf.length) });
      res.end();
      return;
    }
    if ((m = /^\/cdn\/([0-9a-f]{64})$/.exec(p))) {
      const b = blobs.get(m[1]);
      if (!b) { res.writeHead(404).end(); return; }
      sendBlob(req, res, b, fault);
      return;
    }
    // Ollama
    if ((m = /^\/v2\/([^/]+\/[^/]+)\/manifests\/([^/]+)$/.exec(p))) {
      if (m[1] !== ollamaModel || !ollamaTags.includes(m[2])) {
        res.writeHead(404, { 'Content-Type': 'application/json' });
        res.end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}');
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/vnd.docker.distribution.manifest.v2+json' }).end(manifest);
      return;
    }
    if ((m = /^\/v2\/([^/]+\/[^/]+)\/blobs\/sha256:([0-9a-f]{64})$/.exec(p))) {
      const b = m[1] === ollamaModel && blobs.get(m[2]);
      if (!b) { res.writeHead(404).end(); return; }
      sendBlob(req, res, b, fault);
      return;
    }
    res.writeHead(404).end('not found');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  hub.url = `http://127.0.0.1:${server.address().port}`;
  hub.env = { HF_ENDPOINT: hub.url, PARLEY_OLLAMA_REGISTRY: hub.url, PARLEY_NO_EXTERNAL_MODELS: '1' };
  hub.stop = () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); });
  return hub;
}
