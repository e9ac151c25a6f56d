import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readAll } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";

let dir: string;
let store: LocalBlobStore;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), "engram-blob-write-"));
  store = new LocalBlobStore(dir, async () => Buffer.alloc(32, 1));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sha = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

describe("the embedded store's server-side write (agent session files)", () => {
  it("writes bytes and metadata that describe each other", async () => {
    const bytes = Buffer.from("a session transcript\n");
    await store.write("sessions/one", bytes, "text/plain; charset=utf-8");
    expect(await store.head("sessions/one")).toEqual({ size: bytes.length, contentType: "text/plain; charset=utf-8", sha256: sha(bytes) });
    expect((await readAll(store, "sessions/one")).equals(bytes)).toBe(true);
  });

  it("a write whose bytes never reach their place leaves no metadata for them", async () => {
    // What a crash between the two steps leaves: the old order wrote the metadata first, so a write
    // stopped before its bytes were moved into place left a description of bytes that are not there.
    // A rename that fails (a directory in the way) stops the write at that very point.
    const target = path.join(dir, "sessions", "blocked");
    mkdirSync(path.join(target, "inside"), { recursive: true });
    await expect(store.write("sessions/blocked", Buffer.from("never placed"), "text/plain")).rejects.toThrow();
    expect(existsSync(`${target}.meta.json`)).toBe(false);
    expect(await store.head("sessions/blocked")).toBeNull();
  });

  it("metadata left by an earlier object does not describe bytes that replaced it (a crash between bytes and metadata)", async () => {
    const old = Buffer.from("the first version");
    await store.write("sessions/replaced", old, "text/plain");
    // The state a write that crashed after moving its bytes into place, before its metadata, leaves:
    // new bytes (a new file renamed over the old), the old object's metadata.
    const target = path.join(dir, "sessions", "replaced");
    const newer = Buffer.from("the second, longer version of it");
    writeFileSync(`${target}.next`, newer);
    renameSync(`${target}.next`, target);
    const info = await store.head("sessions/replaced");
    // Never the old sha256 or size paired with the new bytes: the new bytes, by their size alone.
    expect(info).toEqual({ size: newer.length, contentType: undefined });
    expect(info?.sha256).not.toBe(sha(old));
    // The bytes themselves are whole: a reader that does not need the metadata reads them.
    expect((await readAll(store, "sessions/replaced")).equals(newer)).toBe(true);
    // A later write of the object makes it whole again.
    await store.write("sessions/replaced", newer, "text/plain");
    expect(await store.head("sessions/replaced")).toEqual({ size: newer.length, contentType: "text/plain", sha256: sha(newer) });
  });

  it("a reader during a replacement never sees one version's metadata with the other's bytes", async () => {
    const versions = [Buffer.from("short"), Buffer.from("a noticeably longer second version")];
    await store.write("sessions/busy", versions[0]!, "text/plain");
    const known = new Set(versions.map((bytes) => `${bytes.length}:${sha(bytes)}`));
    const seen: string[] = [];
    let writing = true;
    const reader = (async () => {
      while (writing) {
        const info = await store.head("sessions/busy");
        // Reported by size alone (no sha256) when the metadata read did not match the bytes stat'ed.
        if (info) seen.push(info.sha256 === undefined ? `${info.size}:${sha(versions.find((v) => v.length === info.size)!)}` : `${info.size}:${info.sha256}`);
      }
    })();
    for (let i = 0; i < 100; i++) await store.write("sessions/busy", versions[(i + 1) % 2]!, "text/plain");
    writing = false;
    await reader;
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((pair) => !known.has(pair))).toEqual([]);
  });
});
