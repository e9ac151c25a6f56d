import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// A re-push to a source_path updates that memory in place with what the push names, as a new push
// stores it: project_context (recall boosts by repo/project/branch) and initiation_type included.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h?.close());

describe("re-push by source_path", () => {
  it("stores project_context and initiation_type, as a new push does, and keeps them when the re-push names none", async () => {
    const first = await ann.post("/v1/memories", { content: "# Deploy\n\nRun migrations first.", source_path: "notes/deploy.md" });
    expect(first.status).toBe(201);
    expect(first.body.data.project_context ?? null).toBeNull();
    const context = { repo: "acme/shop", branch: "main" };
    const again = await ann.post("/v1/memories", {
      content: "# Deploy\n\nRun migrations first, then restart.",
      source_path: "notes/deploy.md",
      project_context: context,
      initiation_type: "human_requested_agent",
    });
    expect(again.status).toBe(200);
    expect(again.body.data.id).toBe(first.body.data.id);
    expect(again.body.data).toMatchObject({ project_context: context, initiation_type: "human_requested_agent" });
    // The same content with only new context is still an update, not "unchanged".
    const moved = await ann.post("/v1/memories", {
      content: "# Deploy\n\nRun migrations first, then restart.",
      source_path: "notes/deploy.md",
      project_context: { repo: "acme/shop", branch: "release" },
    });
    expect(moved.body.data).toMatchObject({ project_context: { repo: "acme/shop", branch: "release" }, initiation_type: "human_requested_agent" });
    const kept = await ann.post("/v1/memories", { content: "# Deploy\n\nAll done.", source_path: "notes/deploy.md" });
    expect(kept.body.data).toMatchObject({ project_context: { repo: "acme/shop", branch: "release" }, initiation_type: "human_requested_agent" });
  });

  it("a link pushed again stores them too", async () => {
    const link = await ann.post("/v1/memories", { content: "https://example.test/kiln-guide" });
    expect(link.body.data.content_type).toBe("link");
    const again = await ann.post("/v1/memories", { content: "https://example.test/kiln-guide", project_context: { project: "kiln" }, initiation_type: "human_direct" });
    expect(again.body.data.id).toBe(link.body.data.id);
    expect(again.body.data).toMatchObject({ project_context: { project: "kiln" }, initiation_type: "human_direct" });
  });
});
