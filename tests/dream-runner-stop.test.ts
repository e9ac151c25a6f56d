import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Db } from "@/lib/db/database.ts";
import { DreamRunner } from "@/lib/dreams/dream-runner.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Harness } from "./support/harness.ts";

// stop() while a run is in progress: the run ends, and whoever waits on idle() (a shutdown, a test)
// is let go then, not left waiting for ever.

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});

afterAll(async () => {
  await h.close();
});

const settled = (promise: Promise<void>, ms: number) =>
  Promise.race([promise.then(() => "idle"), new Promise<string>((resolve) => setTimeout(() => resolve("still waiting"), ms))]);

describe("DreamRunner.stop during a run", () => {
  it("idle() resolves once the run in progress ends, whether asked before or after stop()", async () => {
    // The run in progress waits for its database until the test lets it go on.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const runner = new DreamRunner({ db: async () => (await gate, h.db as Db), schedule: false, exclusiveDatabase: true });
    runner.enqueue(newId());
    runner.enqueue(newId());
    const before = runner.idle();
    runner.stop();
    const after = runner.idle();
    release();
    expect(await settled(before, 5_000)).toBe("idle");
    expect(await settled(after, 5_000)).toBe("idle");
    // Stopped with nothing running, it is idle at once.
    expect(await settled(runner.idle(), 100)).toBe("idle");
  });
});
