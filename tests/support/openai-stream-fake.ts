import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { expect } from "vitest";

/** A stand-in for the OpenAI chat completions API (streaming), recording every prompt it is sent. */
export interface FakeChat {
  url: string;
  requests: any[];
  reply: string;
  fail: boolean;
  /** Accept the request and never answer (ended when the fake closes). */
  stall: boolean;
  /** When set, write this many words of the reply, then go quiet (ended when the fake closes). */
  stallAfterWords?: number;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<any> {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  return raw ? JSON.parse(raw) : undefined;
}

export async function startFakeChat(): Promise<FakeChat> {
  const fake = { requests: [], reply: "", fail: false, stall: false } as unknown as FakeChat;
  const stalled: import("node:http").ServerResponse[] = [];
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    fake.requests.push(body);
    if (req.url !== "/v1/chat/completions") {
      res.writeHead(404).end();
      return;
    }
    if (fake.stall) {
      stalled.push(res);
      return;
    }
    if (fake.fail) {
      res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "upstream exploded", type: "server_error" } }));
      return;
    }
    expect(body.stream).toBe(true);
    res.writeHead(200, { "content-type": "text/event-stream" });
    const chunk = (delta: Record<string, unknown>, finish: string | null, usage?: unknown) =>
      `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: body.model, choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;
    res.write(chunk({ role: "assistant", content: "" }, null));
    const words = fake.reply.match(/\S+\s*/g) ?? [];
    if (fake.stallAfterWords !== undefined) {
      for (const word of words.slice(0, fake.stallAfterWords)) res.write(chunk({ content: word }, null));
      stalled.push(res);
      return;
    }
    for (const word of words) res.write(chunk({ content: word }, null));
    res.write(chunk({}, "stop", { prompt_tokens: 100, completion_tokens: 17, total_tokens: 117 }));
    res.end("data: [DONE]\n\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () => {
    for (const res of stalled) res.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  return fake;
}

