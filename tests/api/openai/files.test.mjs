// files.test.mjs - OpenAI Files and Uploads through the official `openai`
// SDK against the real binary (../shared/specs/openai.md 5, checks 31-32):
// upload, retrieve, list with cursor auto-pagination, byte-exact download,
// delete, bad input, expiry fields, multipart Uploads (parts + complete),
// cancel, and the --max-upload limit.
//
// Expected values are written out here (sizes, byte patterns, ids seen at
// upload time), never read back from the server and compared with itself.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, createReadStream, rmSync, readdirSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import OpenAI, { toFile, NotFoundError, BadRequestError, APIError } from 'openai';
import { startServer, rawRequest } from '../lib/server.mjs';

const MAX_UPLOAD = 64 * 1024;
let srv, client, tmp, skip = null;

before(async () => {
  srv = await startServer({ args: ['--max-upload', '64K'] });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
  tmp = mkdtempSync(path.join(tmpdir(), 'parley-files-'));
  // The routes are wired by app/main.c; a binary without them answers 404.
  const probe = await fetch(`${srv.url}/v1/files`);
  if (probe.status === 404) skip = 'this binary has no /v1/files routes (wire openai_files_routes in src/app/main.c)';
});
after(async () => {
  // A clean exit after SIGTERM: under a sanitizer build (PARLEY_BIN) a leak
  // or memory error turns into a non-zero code, with the report in the log.
  if (srv) {
    const log = srv.log;
    const code = await srv.stop();
    assert.equal(code, 0, `parley exited with ${code}:\n${log().slice(-4000)}`);
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// All 256 byte values, repeated: 4096 bytes where byte i == i % 256.
function allBytes(n = 4096) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = i % 256;
  return b;
}

async function contentOf(id) {
  const res = await client.files.content(id);
  return Buffer.from(await res.arrayBuffer());
}

test('files.create from a read stream: File object with the right bytes and filename', async (t) => {
  if (skip) return t.skip(skip);
  const text = '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}\n'.repeat(3);
  const p = path.join(tmp, 'x.jsonl');
  writeFileSync(p, text);
  const before_s = Math.floor(Date.now() / 1000);
  const f = await client.files.create({ file: createReadStream(p), purpose: 'batch' });
  assert.equal(f.object, 'file');
  assert.match(f.id, /^file-[0-9a-z]+$/);
  assert.equal(f.bytes, Buffer.byteLength(text));
  assert.equal(f.bytes, 219); // 3 lines of 73 bytes
  assert.equal(f.filename, 'x.jsonl');
  assert.equal(f.purpose, 'batch');
  assert.equal(f.status, 'processed');
  assert.equal(f.status_details, null);
  assert.equal(f.expires_at, null);
  assert.ok(f.created_at >= before_s - 1 && f.created_at <= before_s + 5, `created_at ${f.created_at}`);
  const keys = Object.keys(f).sort();
  assert.deepEqual(keys, ['bytes', 'created_at', 'expires_at', 'filename', 'id', 'object', 'purpose', 'status', 'status_details']);

  const r = await client.files.retrieve(f.id);
  assert.deepEqual(r, f);
  assert.equal((await contentOf(f.id)).toString('utf8'), text);
});

test('binary content with all 256 byte values downloads byte for byte', async (t) => {
  if (skip) return t.skip(skip);
  const data = allBytes();
  const f = await client.files.create({ file: await toFile(data, 'bin.dat'), purpose: 'user_data' });
  assert.equal(f.bytes, 4096);
  assert.equal(f.filename, 'bin.dat');
  const res = await client.files.content(f.id);
  assert.equal(res.headers.get('content-type'), 'application/octet-stream');
  const got = Buffer.from(await res.arrayBuffer());
  assert.equal(got.length, 4096);
  assert.ok(got.equals(data), 'downloaded bytes differ from the upload');
  // an empty file is a file too
  const e = await client.files.create({ file: await toFile(Buffer.alloc(0), 'empty.txt'), purpose: 'assistants' });
  assert.equal(e.bytes, 0);
  assert.equal((await contentOf(e.id)).length, 0);
});

test('expires_after sets expires_at = created_at + seconds; out of range is 400 naming the field', async (t) => {
  if (skip) return t.skip(skip);
  const f = await client.files.create({
    file: await toFile(Buffer.from('hello'), 'e.txt'), purpose: 'user_data',
    expires_after: { anchor: 'created_at', seconds: 3600 },
  });
  assert.equal(f.expires_at, f.created_at + 3600);
  assert.equal((await client.files.retrieve(f.id)).expires_at, f.created_at + 3600);
  for (const [seconds, param] of [[3599, 'expires_after[seconds]'], [2592001, 'expires_after[seconds]']]) {
    await assert.rejects(
      client.files.create({ file: await toFile(Buffer.from('x'), 'e.txt'), purpose: 'user_data', expires_after: { anchor: 'created_at', seconds } }),
      (e) => e instanceof BadRequestError && e.param === param && /3600\.\.2592000/.test(e.message));
  }
  await assert.rejects(
    client.files.create({ file: await toFile(Buffer.from('x'), 'e.txt'), purpose: 'user_data', expires_after: { anchor: 'last_active_at', seconds: 3600 } }),
    (e) => e instanceof BadRequestError && e.param === 'expires_after[anchor]');
});

test('a bad or missing purpose, or a missing file, is BadRequestError naming the field', async (t) => {
  if (skip) return t.skip(skip);
  await assert.rejects(client.files.create({ file: await toFile(Buffer.from('x'), 'a.txt'), purpose: 'training' }),
    (e) => e instanceof BadRequestError && e.status === 400 && e.param === 'purpose' && /purpose/.test(e.message) &&
      /training/.test(e.message) && e.type === 'invalid_request_error');
  const fd = new FormData();
  fd.append('file', new Blob(['x']), 'a.txt');
  let r = await fetch(`${srv.url}/v1/files`, { method: 'POST', body: fd });
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.param, 'purpose');
  const fd2 = new FormData();
  fd2.append('purpose', 'batch');
  r = await fetch(`${srv.url}/v1/files`, { method: 'POST', body: fd2 });
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.param, 'file');
});

test('list: purpose filter, limit 1 auto-pagination, order, has_more, bad limit', async (t) => {
  if (skip) return t.skip(skip);
  const ids = [];
  for (let i = 0; i < 4; i++) {
    const f = await client.files.create({ file: await toFile(Buffer.from(`eval ${i}`), `ev${i}.jsonl`), purpose: 'evals' });
    ids.push(f.id);
  }
  // default order is desc (newest first): walk one file per page
  const seen = [];
  for await (const f of client.files.list({ purpose: 'evals', limit: 1 })) {
    assert.equal(f.purpose, 'evals');
    seen.push(f.id);
  }
  assert.deepEqual(seen, [...ids].reverse());
  const asc = [];
  for await (const f of client.files.list({ purpose: 'evals', limit: 3, order: 'asc' })) asc.push(f.id);
  assert.deepEqual(asc, ids);
  // one page by hand: the CursorPage body
  const r = await fetch(`${srv.url}/v1/files?purpose=evals&limit=2&order=asc`);
  const page = await r.json();
  assert.equal(page.object, 'list');
  assert.deepEqual(page.data.map((f) => f.id), ids.slice(0, 2));
  assert.equal(page.first_id, ids[0]);
  assert.equal(page.last_id, ids[1]);
  assert.equal(page.has_more, true);
  const last = await (await fetch(`${srv.url}/v1/files?purpose=evals&limit=2&order=asc&after=${ids[1]}`)).json();
  assert.deepEqual(last.data.map((f) => f.id), ids.slice(2));
  assert.equal(last.has_more, false);
  // a purpose nobody used: an empty page, without first_id/last_id (the
  // schema types them as strings, so null is not allowed)
  const none = await (await fetch(`${srv.url}/v1/files?purpose=vision`)).json();
  assert.deepEqual(none, { object: 'list', data: [], has_more: false });
  // the unfiltered list holds these files too
  const all = [];
  for await (const f of client.files.list()) all.push(f.id);
  for (const id of ids) assert.ok(all.includes(id));
  for (const q of ['limit=0', 'limit=10001', 'limit=abc']) {
    const b = await fetch(`${srv.url}/v1/files?${q}`);
    assert.equal(b.status, 400, q);
    assert.equal((await b.json()).error.param, 'limit');
  }
  const o = await fetch(`${srv.url}/v1/files?order=sideways`);
  assert.equal(o.status, 400);
  assert.equal((await o.json()).error.param, 'order');
});

test('delete: deleted:true, then retrieve, content and delete are NotFoundError', async (t) => {
  if (skip) return t.skip(skip);
  const f = await client.files.create({ file: await toFile(Buffer.from('bye'), 'bye.txt'), purpose: 'assistants' });
  const d = await client.files.delete(f.id);
  assert.deepEqual(d, { id: f.id, object: 'file', deleted: true });
  await assert.rejects(client.files.retrieve(f.id), (e) => e instanceof NotFoundError);
  await assert.rejects(client.files.content(f.id), (e) => e instanceof NotFoundError);
  await assert.rejects(client.files.delete(f.id), (e) => e instanceof NotFoundError);
  const r = await fetch(`${srv.url}/v1/files/file-doesnotexist`);
  assert.equal(r.status, 404);
  assert.deepEqual((await r.json()).error, {
    message: 'No such File object: file-doesnotexist', type: 'invalid_request_error', param: 'file_id', code: null,
  });
});

test('waitForProcessing returns the processed file promptly', async (t) => {
  if (skip) return t.skip(skip);
  const f = await client.files.create({ file: await toFile(Buffer.from('{}\n'), 'w.jsonl'), purpose: 'batch' });
  const t0 = Date.now();
  const w = await client.files.waitForProcessing(f.id, { pollInterval: 50, maxWait: 5000 });
  assert.equal(w.status, 'processed');
  assert.equal(w.id, f.id);
  assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
});

test('uploads: create, three parts sent in parallel, complete in order -> identical file', async (t) => {
  if (skip) return t.skip(skip);
  const data = allBytes(3 * 5000 + 123);
  const chunks = [data.subarray(0, 5000), data.subarray(5000, 10000), data.subarray(10000)];
  const up = await client.uploads.create({ bytes: data.length, filename: 'big.bin', mime_type: 'application/octet-stream', purpose: 'assistants' });
  assert.match(up.id, /^upload_[0-9a-z]+$/);
  assert.equal(up.object, 'upload');
  assert.equal(up.status, 'pending');
  assert.equal(up.bytes, 15123);
  assert.equal(up.filename, 'big.bin');
  assert.equal(up.purpose, 'assistants');
  assert.equal(up.file, null);
  assert.equal(up.expires_at, up.created_at + 3600);
  const parts = await Promise.all(chunks.map(async (c, i) =>
    client.uploads.parts.create(up.id, { data: await toFile(c, `part${i}`) })));
  for (const p of parts) {
    assert.match(p.id, /^part_[0-9a-z]+$/);
    assert.equal(p.object, 'upload.part');
    assert.equal(p.upload_id, up.id);
  }
  // md5 (of the whole content, computed here by node:crypto): a wrong one is
  // 400 naming md5 and the upload stays pending; the right one completes.
  await assert.rejects(client.uploads.complete(up.id, { part_ids: parts.map((p) => p.id), md5: createHash('md5').update('nope').digest('hex') }),
    (e) => e instanceof BadRequestError && e.param === 'md5');
  await assert.rejects(client.uploads.complete(up.id, { part_ids: parts.map((p) => p.id), md5: 'xyz' }),
    (e) => e instanceof BadRequestError && e.param === 'md5');
  const md5 = createHash('md5').update(data).digest('hex');
  const done = await client.uploads.complete(up.id, { part_ids: parts.map((p) => p.id), md5 });
  assert.equal(done.id, up.id);
  assert.equal(done.status, 'completed');
  assert.equal(done.file.object, 'file');
  assert.match(done.file.id, /^file-/);
  assert.equal(done.file.bytes, 15123);
  assert.equal(done.file.filename, 'big.bin');
  assert.equal(done.file.purpose, 'assistants');
  assert.equal(done.file.status, 'processed');
  const got = await contentOf(done.file.id);
  assert.ok(got.equals(data), 'assembled upload differs from the parts');
  // a completed upload takes no more parts and cannot complete again
  await assert.rejects(client.uploads.parts.create(up.id, { data: await toFile(Buffer.from('x'), 'p') }),
    (e) => e instanceof BadRequestError && /completed/.test(e.message));
  await assert.rejects(client.uploads.complete(up.id, { part_ids: parts.map((p) => p.id) }),
    (e) => e instanceof BadRequestError);
});

test('uploads: part order is the order of part_ids, not of arrival', async (t) => {
  if (skip) return t.skip(skip);
  const up = await client.uploads.create({ bytes: 6, filename: 'o.txt', mime_type: 'text/plain', purpose: 'user_data' });
  const b = await client.uploads.parts.create(up.id, { data: await toFile(Buffer.from('def'), 'b') });
  const a = await client.uploads.parts.create(up.id, { data: await toFile(Buffer.from('abc'), 'a') });
  const done = await client.uploads.complete(up.id, { part_ids: [a.id, b.id] });
  assert.equal((await contentOf(done.file.id)).toString(), 'abcdef');
});

test('uploads: wrong byte count, foreign part, repeated part are 400; the upload stays pending', async (t) => {
  if (skip) return t.skip(skip);
  const up = await client.uploads.create({ bytes: 10, filename: 'w.txt', mime_type: 'text/plain', purpose: 'batch' });
  const p = await client.uploads.parts.create(up.id, { data: await toFile(Buffer.from('12345'), 'p') });
  await assert.rejects(client.uploads.complete(up.id, { part_ids: [p.id] }),
    (e) => e instanceof BadRequestError && /5 bytes but 10/.test(e.message));
  await assert.rejects(client.uploads.complete(up.id, { part_ids: [p.id, p.id] }),
    (e) => e instanceof BadRequestError && /repeated/.test(e.message));
  await assert.rejects(client.uploads.complete(up.id, { part_ids: [p.id, 'part_nope'] }),
    (e) => e instanceof BadRequestError && /part_nope/.test(e.message));
  const p2 = await client.uploads.parts.create(up.id, { data: await toFile(Buffer.from('67890'), 'p') });
  const done = await client.uploads.complete(up.id, { part_ids: [p.id, p2.id] });
  assert.equal((await contentOf(done.file.id)).toString(), '1234567890');
});

test('uploads: cancel -> cancelled, then no parts; bad create fields; unknown id is 404', async (t) => {
  if (skip) return t.skip(skip);
  const up = await client.uploads.create({ bytes: 3, filename: 'c.txt', mime_type: 'text/plain', purpose: 'vision' });
  await client.uploads.parts.create(up.id, { data: await toFile(Buffer.from('abc'), 'p') });
  const c = await client.uploads.cancel(up.id);
  assert.equal(c.id, up.id);
  assert.equal(c.status, 'cancelled');
  assert.equal(c.file, null);
  await assert.rejects(client.uploads.parts.create(up.id, { data: await toFile(Buffer.from('x'), 'p') }),
    (e) => e instanceof BadRequestError && /cancelled/.test(e.message));
  await assert.rejects(client.uploads.cancel(up.id), (e) => e instanceof BadRequestError);
  await assert.rejects(client.uploads.cancel('upload_nope'), (e) => e instanceof NotFoundError && e.param === 'upload_id');
  await assert.rejects(client.uploads.parts.create('upload_nope', { data: await toFile(Buffer.from('x'), 'p') }),
    (e) => e instanceof NotFoundError);
  await assert.rejects(client.uploads.create({ bytes: 3, filename: 'c.txt', mime_type: 'text/plain', purpose: 'nope' }),
    (e) => e instanceof BadRequestError && e.param === 'purpose');
  await assert.rejects(client.uploads.create({ bytes: -1, filename: 'c.txt', mime_type: 'text/plain', purpose: 'batch' }),
    (e) => e instanceof BadRequestError && e.param === 'bytes');
  await assert.rejects(client.uploads.create({ bytes: 'many', filename: 'c.txt', mime_type: 'text/plain', purpose: 'batch' }),
    (e) => e instanceof BadRequestError && e.param === 'bytes');
  await assert.rejects(client.uploads.create({ bytes: 3, mime_type: 'text/plain', purpose: 'batch' }),
    (e) => e instanceof BadRequestError && e.param === 'filename');
});

test('a file over --max-upload is 413; nothing is stored', async (t) => {
  if (skip) return t.skip(skip);
  const n0 = (await (await fetch(`${srv.url}/v1/files?purpose=fine-tune`)).json()).data.length;
  await assert.rejects(
    client.files.create({ file: await toFile(Buffer.alloc(MAX_UPLOAD + 1024, 7), 'big.jsonl'), purpose: 'fine-tune' }),
    (e) => e instanceof APIError && e.status === 413);
  const up = await client.uploads.create({ bytes: MAX_UPLOAD + 1024, filename: 'u.bin', mime_type: 'application/octet-stream', purpose: 'fine-tune' });
  await assert.rejects(client.uploads.parts.create(up.id, { data: await toFile(Buffer.alloc(MAX_UPLOAD + 1024), 'p') }),
    (e) => e instanceof APIError && e.status === 413);
  const n1 = (await (await fetch(`${srv.url}/v1/files?purpose=fine-tune`)).json()).data.length;
  assert.equal(n1, n0);
});

test('a client that vanishes mid-upload leaves no file behind', async (t) => {
  if (skip) return t.skip(skip);
  const before_ids = (await (await fetch(`${srv.url}/v1/files?limit=10000`)).json()).data.map((f) => f.id);
  const boundary = 'XyZzY';
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`;
  const res = await rawRequest(srv.port, [
    `POST /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 40000\r\n\r\n`,
    head, 'x'.repeat(5000),
  ], { ms: 500 });
  assert.doesNotMatch(res.text, /^HTTP\/1\.1 200/);
  await new Promise((r) => setTimeout(r, 200));
  const after_ids = (await (await fetch(`${srv.url}/v1/files?limit=10000`)).json()).data.map((f) => f.id);
  assert.deepEqual(after_ids, before_ids);
});

test('a crash (SIGKILL) mid-upload leaves no file, no row, no spool or temp file after restart', async (t) => {
  if (skip) return t.skip(skip);
  const a = await startServer();
  const b_ = { srv: null };
  try {
    const ca = new OpenAI({ baseURL: `${a.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
    const kept = await ca.files.create({ file: await toFile(allBytes(3000), 'kept.bin'), purpose: 'batch' });
    // Half of a multipart upload on a socket that stays open.
    const boundary = 'CrashBoundary';
    const sock = net.connect(a.port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.write(`POST /v1/files HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 50000\r\n\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="lost.bin"\r\n\r\n` + 'y'.repeat(20000));
    const spool = path.join(a.dataDir, 'spool');
    for (let i = 0; i < 100 && readdirSync(spool).length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(readdirSync(spool).length > 0, 'the partial upload was never spooled');
    const exited = new Promise((r) => a.proc.once('exit', r));
    a.proc.kill('SIGKILL');
    await exited;
    sock.destroy();
    // Restart on the same data directory (the last --data-dir wins).
    b_.srv = await startServer({ args: ['--data-dir', a.dataDir] });
    const cb = new OpenAI({ baseURL: `${b_.srv.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
    const ids = [];
    for await (const f of cb.files.list()) ids.push(f.id);
    assert.deepEqual(ids, [kept.id]);
    const got = Buffer.from(await (await cb.files.content(kept.id)).arrayBuffer());
    assert.ok(got.equals(allBytes(3000)));
    assert.deepEqual(readdirSync(spool), []);
    assert.deepEqual(readdirSync(path.join(a.dataDir, 'blobs')).length, 1);
  } finally {
    if (b_.srv) await b_.srv.stop();
    if (a.proc.exitCode === null && a.proc.signalCode === null) await a.stop();
    rmSync(a.dataDir, { recursive: true, force: true });
  }
});
