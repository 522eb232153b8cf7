// Server-sent events of an OpenAI-style stream: yields the payload of every `data:` event as a
// string ('[DONE]' included), in order, as the body arrives. Comment lines (keep-alives) are skipped.
export async function* sseData(body) {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const piece of body) {
    buf += decoder.decode(piece, { stream: true });
    let idx;
    while ((idx = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, idx);
      buf = buf.slice(idx + 2);
      if (event.startsWith('data: ')) yield event.slice(6);
    }
  }
}
