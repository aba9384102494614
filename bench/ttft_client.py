#!/usr/bin/python3
"""bench/ttft_client.py - time from a request to its first token event, seen
from a raw socket (for bench/sse.sh; not a test).

    python3 bench/ttft_client.py HOST:PORT MODEL PROMPT [RUNS=1]

Why raw sockets: Node's http client spends 1-3 ms of its own between
`http.request` and the bytes leaving, and again before a 'data' callback,
which hides a server-side overhead of that size. Here the clock starts just
before the one send() of a complete request on a keep-alive connection that
already answered GET /health, and stops when recv() returns the bytes that
complete the first SSE event carrying text; what remains besides the
server is two loopback hops and a few Python statements (tens of
microseconds).

Each run is a streamed legacy completion (POST /v1/completions, one token,
temperature 0, EOS banned with logit_bias so it always yields text). Prints
one JSON line per run: prompt_tokens, ttft_ms.
"""
import json
import socket
import sys
import time


def read_response(sock, buf):
    """Reads one HTTP/1.1 response (Content-Length or chunked) and returns
    (head, body, rest). Body chunks are de-chunked."""
    while b"\r\n\r\n" not in buf:
        buf += recv(sock)
    head, buf = buf.split(b"\r\n\r\n", 1)
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        body = b""
        while True:
            while b"\r\n" not in buf:
                buf += recv(sock)
            size_line, buf = buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < size + 2:
                buf += recv(sock)
            body += buf[:size]
            buf = buf[size + 2:]
            if size == 0:
                return head, body, buf
    n = 0
    for line in lower.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    while len(buf) < n:
        buf += recv(sock)
    return head, buf[:n], buf[n:]


def recv(sock):
    b = sock.recv(65536)
    if not b:
        raise SystemExit("connection closed by the server")
    return b


def first_text_seen(raw):
    """True once the raw (still chunked) bytes hold a complete SSE event whose
    choices[0].text is not empty."""
    for ev in raw.split(b"\n\n")[:-1]:
        i = ev.find(b"data: {")
        if i < 0:
            continue
        try:
            j = json.loads(ev[i + 6:].split(b"\r\n")[0])
        except ValueError:
            continue
        ch = j.get("choices") or []
        if ch and ch[0].get("text"):
            return True
    return False


def main():
    hostport, model, prompt = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    host, port = hostport.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: " + hostport.encode() + b"\r\n\r\n")
    rest = read_response(sock, b"")[2]
    for r in range(runs):
        body = json.dumps({"model": model, "prompt": f"{r} {prompt}", "max_tokens": 1, "temperature": 0,
                           "stream": True, "stream_options": {"include_usage": True},
                           "logit_bias": {"2": -100}}).encode()
        req = (b"POST /v1/completions HTTP/1.1\r\nHost: " + hostport.encode() +
               b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
               b"\r\n\r\n" + body)
        t0 = time.perf_counter_ns()
        sock.sendall(req)
        raw = rest
        t1 = None
        while t1 is None:
            raw += recv(sock)
            if first_text_seen(raw):
                t1 = time.perf_counter_ns()
        head, data, rest = read_response(sock, raw)
        if not head.startswith(b"HTTP/1.1 200"):
            raise SystemExit(head.decode(errors="replace"))
        usage = None
        for ev in data.split(b"\n\n"):
            if ev.startswith(b"data: {"):
                j = json.loads(ev[6:])
                usage = j.get("usage") or usage
        print(json.dumps({"prompt_tokens": usage and usage["prompt_tokens"], "ttft_ms": (t1 - t0) / 1e6}))


main()
