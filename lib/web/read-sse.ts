/**
 * Reads a text/event-stream body from fetch, calling `onEvent` per event as it arrives. fetch
 * rather than EventSource: a refused stream then shows the API's own error message, and a POST
 * (the ask box) can stream too. `id` is the event's `id:` line, for resuming with Last-Event-ID.
 */
export async function readSse(body: ReadableStream<Uint8Array>, onEvent: (event: string, data: unknown, id?: string) => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      let data = "";
      let id: string | undefined;
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
        else if (line.startsWith("id: ")) id = line.slice(4);
      }
      // Comment-only blocks (": ping") carry no data and are skipped.
      if (data) onEvent(event, JSON.parse(data), id);
    }
  }
}
