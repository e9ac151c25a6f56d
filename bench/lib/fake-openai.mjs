// A local stand-in for OpenAI's embeddings API (POST /v1/embeddings): answers after a fixed delay with
// deterministic vectors of the requested size. It runs as its own process, like the remote service
// it replaces, so generating its answers never takes the benchmarked server's CPU time slice.
//   node bench/lib/fake-openai.mjs PORT DELAY_MS
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";

/** Starts the fake in a child process; resolves once it listens. */
export function startFakeOpenAi(port, delayMs) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), String(port), String(delayMs)], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`fake OpenAI exited with ${code}`)));
    child.stdout.once("data", () => resolve({ close: () => child.kill() }));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [port, delayMs] = process.argv.slice(2).map(Number);
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk.toString()));
    req.on("end", () => {
      const input = JSON.parse(body);
      const texts = Array.isArray(input.input) ? input.input : [input.input];
      const dims = input.dimensions ?? 1536;
      const data = texts.map((text, index) => {
        let seed = 2166136261;
        for (let i = 0; i < text.length; i++) seed = Math.imul(seed ^ text.charCodeAt(i), 16777619) >>> 0;
        const embedding = Array.from({ length: dims }, () => {
          seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
          return seed / 4294967296 - 0.5;
        });
        return { object: "embedding", index, embedding };
      });
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data, model: input.model, usage: { prompt_tokens: 0, total_tokens: 0 } }));
      }, delayMs);
    });
  });
  server.listen(port, "127.0.0.1", () => process.stdout.write("listening\n"));
}
