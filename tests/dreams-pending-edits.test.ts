import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { indexMemories } from "./recall-helpers.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// A memory whose edit is waiting to be processed still has the chunks (and vectors) of its old text:
// a dream's similarity and organize passes leave it out, as recall does, until it is processed.

let h: Harness;
let owner: Client;

beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

const PLANTED = {
  dupOld: "Use pnpm, not npm, for installing dependencies in the web repo.",
  dupNew: "In the web repo we install dependencies with pnpm instead of npm.",
  k8s1: "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
  k8s2: "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
  k8s3: "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
  k8s4: "Restart a stuck Kubernetes pod with kubectl rollout restart on its deployment.",
} as const;
type Key = keyof typeof PLANTED;

async function dream(hubId: string): Promise<string> {
  const queued = await queueDreamRun(h.db, hubId, owner.id, new Date());
  expect(queued.status).toBe("queued");
  const runId = queued.run_id;
  expect(await runDreamRunOnce(h.db, runId)).toBe(true);
  return runId;
}

describe("a dream run and memories with an edit pending", () => {
  it("neither merges nor organizes them; the next run after processing does", async () => {
    const hubId = await h.teamHub(owner);
    const ids = {} as Record<Key, string>;
    let i = 0;
    for (const key of Object.keys(PLANTED) as Key[]) {
      const res = await owner.post("/v1/memories", { content: PLANTED[key] }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      ids[key] = res.body.data.id;
      const at = new Date(Date.now() - 10 * 86_400_000 + i++ * 60_000);
      await h.db.memory.update({ where: { id: ids[key] }, data: { createdAt: at, updatedAt: at } });
    }
    await indexMemories(h.db, Object.values(ids));
    const editing = [ids.dupNew, ids.k8s1, ids.k8s2, ids.k8s3, ids.k8s4];
    await h.db.memory.updateMany({ where: { id: { in: editing } }, data: { processingStatus: "pending" } });

    const first = await dream(hubId);
    const actions = await h.db.dreamAction.findMany({ where: { runId: first } });
    expect(actions.filter((a) => a.sourceMemoryIds.some((id) => editing.includes(id)))).toEqual([]);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: ids.dupOld } })).state).toBe("active");
    expect(await h.db.memory.count({ where: { id: { in: editing }, topicId: { not: null } } })).toBe(0);

    // Processed: considered again, and merged and organized as any other.
    await h.db.memory.updateMany({ where: { id: { in: editing } }, data: { processingStatus: "done" } });
    await dream(hubId);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: ids.dupOld } }))).toMatchObject({ state: "archived", supersededBy: ids.dupNew });
    expect(await h.db.memory.count({ where: { id: { in: editing.slice(1) }, topicId: { not: null } } })).toBeGreaterThanOrEqual(3);
  }, 180_000);
});
