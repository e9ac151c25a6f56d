import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A local stand-in for the OpenAI chat completions API (non-streaming,
 * structured outputs): `answer` gets the request body and the JSON schema's
 * name and returns the object the model "writes". Records every request.
 */
export interface FakeOpenAiChat {
  url: string;
  requests: any[];
  /** "error": HTTP 500 to every chat request; "hang": never answers (the caller's timeout must fire). */
  mode: "ok" | "error" | "hang";
  /** May be async: a test can act while the model "thinks". */
  answer: (schema: string | undefined, body: any) => unknown;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<any> {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  return raw ? JSON.parse(raw) : undefined;
}

export async function startFakeOpenAiChat(answer: FakeOpenAiChat["answer"]): Promise<FakeOpenAiChat> {
  const fake = { requests: [], mode: "ok", answer } as unknown as FakeOpenAiChat;
  const hanging = new Set<import("node:http").ServerResponse>();
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    if (req.url !== "/v1/chat/completions") {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "not found" } }));
      return;
    }
    fake.requests.push(body);
    if (fake.mode === "hang") {
      hanging.add(res);
      return;
    }
    if (fake.mode === "error") {
      res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "the fake model is down", type: "server_error" } }));
      return;
    }
    const content = await fake.answer(body.response_format?.json_schema?.name, body);
    res.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        id: "chatcmpl-fake",
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: JSON.stringify(content) }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () =>
    new Promise((resolve) => {
      for (const res of hanging) res.destroy();
      server.close(() => resolve());
    });
  return fake;
}
