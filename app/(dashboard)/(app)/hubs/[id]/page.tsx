import { HubMemories, type MemoryPage } from "@/components/hub-memories.tsx";
import { HUB_PAGE_SIZE } from "@/lib/web/types.ts";
import { listMemories } from "@/lib/memories/list-memories.ts";
import { prefetch } from "@/lib/web/prefetch.ts";

export default async function HubPage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  // The list's first page, as the client would ask for it, is in the HTML: no wait for hydration.
  const initial = await prefetch((ctx) => listMemories(ctx, { hub_id: id, limit: String(HUB_PAGE_SIZE), sort: "newest" }) as Promise<unknown> as Promise<MemoryPage>);
  return <HubMemories initial={initial} />;
}
