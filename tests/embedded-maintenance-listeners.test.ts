import { afterAll, beforeAll, expect, test } from "vitest";
import { startEmbeddedMaintenance, stopEmbeddedMaintenance } from "@/lib/db/embedded-maintenance.ts";
import { stopPeriodicTasks } from "@/lib/system/run-periodically.ts";
import { createHarness, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ embedded: true });
});
afterAll(async () => {
  await h.close();
});

// The process-wide set of memory-write listeners (lib/processing/after-memory-write.ts).
const writeListeners = () => (globalThis as unknown as { __engramWriteListeners?: Set<unknown> }).__engramWriteListeners?.size ?? 0;

test("stopping the embedded maintenance removes its memory-write listener (a start after a stop adds no second one)", async () => {
  const before = writeListeners();
  for (let i = 0; i < 5; i++) {
    startEmbeddedMaintenance(h.database);
    expect(writeListeners()).toBe(before + 1);
    await stopEmbeddedMaintenance();
    await stopPeriodicTasks();
  }
  expect(writeListeners()).toBe(before);
});
