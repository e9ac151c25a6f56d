import { HubFrame } from "@/components/hub-frame.tsx";
import { getHub } from "@/lib/hubs/get-hub.ts";
import { prefetch } from "@/lib/web/prefetch.ts";
import type { HubDetail } from "@/lib/web/types.ts";

export default async function HubLayout({ children, params }: { children: React.ReactNode; params: Promise<{ id: string }> }) {
  const { id } = await params;
  const initial = await prefetch((ctx) => getHub(ctx, id) as Promise<unknown> as Promise<HubDetail>);
  return (
    <HubFrame hubId={id} initial={initial}>
      {children}
    </HubFrame>
  );
}
