"""Server-sent events of an OpenAI-style stream, for the benchmark clients.

sse_data(chunks) takes an async iterable of bytes (an aiohttp response's `content.iter_any()`, an
httpx response's `aiter_bytes()`) and yields the payload of every event that has `data:` lines, as a
string ('[DONE]' included), in order, as the body arrives. Events may be split anywhere across
reads, a multi-byte character included; lines may end in LF or CRLF; several `data:` lines of one
event are joined with newlines; comment lines (keep-alives such as `: ping`) and other fields are
skipped. An event that the end of the body cuts short (no blank line after it) is dropped.

    python bench/sse.py     checks the parser against a stream cut at every byte boundary
"""


def _event_data(event: bytes):
    data = None
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            if value.startswith(b" "):
                value = value[1:]
            data = value if data is None else data + b"\n" + value
    return None if data is None else data.decode("utf-8")


async def sse_data(chunks):
    buf = b""
    async for piece in chunks:
        # A CR that ends one piece meets its LF in the next; until then it stays in the tail.
        buf = (buf + piece).replace(b"\r\n", b"\n")
        while True:
            idx = buf.find(b"\n\n")
            if idx < 0:
                break
            event, buf = buf[:idx], buf[idx + 2:]
            data = _event_data(event)
            if data is not None:
                yield data


if __name__ == "__main__":
    import asyncio

    stream = ('data: {"a": "é"}\r\n\r\n: keep-alive\n\ndata: one\ndata: two\n\n'
              'event: x\ndata:{"b":1}\n\ndata: [DONE]\n\n').encode()
    want = ['{"a": "é"}', "one\ntwo", '{"b":1}', "[DONE]"]

    async def collect(pieces):
        async def gen():
            for p in pieces:
                yield p
        return [d async for d in sse_data(gen())]

    async def check():
        assert await collect([stream]) == want
        assert await collect([stream[i:i + 1] for i in range(len(stream))]) == want
        for cut in range(len(stream) + 1):
            assert await collect([stream[:cut], stream[cut:]]) == want, cut
        assert await collect([b"data: cut short"]) == []
        print(f"sse: {len(stream) + 3} splits parsed alike")

    asyncio.run(check())
