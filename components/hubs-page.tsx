"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { useAction } from "@/lib/web/use-action.ts";
import { api } from "@/lib/web/api.ts";
import { plural } from "@/lib/web/format.ts";
import type { Hub, HubListEntry } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { Button, Card, EmptyState, ErrorNotice, LoadingRows, PageHeader, RoleBadge, TextInput } from "./ui.tsx";

export function HubsPage() {
  // One array: the server caps hubs per user (docs/hubs.md), so there is no next page.
  const first = useApi<HubListEntry[]>("/v1/hubs");
  const hubs = first.data ?? [];

  return (
    <>
      <PageHeader title="Hubs" subtitle="Your personal hub and the team hubs you belong to." />
      <CreateHub />
      <section aria-labelledby="hub-list" className="mt-6">
        <h2 id="hub-list" className="sr-only">
          Your hubs
        </h2>
        {first.loading && !first.data ? (
          <LoadingRows rows={3} label="Loading hubs…" />
        ) : first.error ? (
          <ErrorNotice error={first.error} onRetry={first.reload} />
        ) : hubs.length === 0 ? (
          <EmptyState title="No hubs yet">Create a team hub above to share memories with others.</EmptyState>
        ) : (
          <ul className="grid gap-3 sm:grid-cols-2">
            {hubs.map(({ hub, role, memory_count, member_count }) => (
              <li key={hub.id}>
                <Link
                  href={`/hubs/${hub.id}`}
                  prefetch={false}
                  className="flex h-full flex-col gap-2 rounded-lg border border-slate-200 bg-white p-4 shadow-sm hover:border-indigo-300"
                >
                  <span className="flex items-center justify-between gap-2">
                    <span className="truncate font-semibold">{hub.name}</span>
                    <RoleBadge role={role} />
                  </span>
                  <span className="text-sm text-slate-500">
                    {hub.hub_type === "personal" ? "Personal" : `/${hub.slug}`} · {plural(memory_count, "memory", "memories")} ·{" "}
                    {plural(member_count, "member")}
                  </span>
                </Link>
              </li>
            ))}
          </ul>
        )}
      </section>
    </>
  );
}

function CreateHub() {
  const router = useRouter();
  const [name, setName] = useState("");
  const { busy, error, run } = useAction();
  return (
    <Card title="Create a team hub">
      <form
        className="flex flex-col gap-3 sm:flex-row sm:items-end"
        onSubmit={async (event) => {
          event.preventDefault();
          await run(async () => {
            const hub = await api<Hub>("/v1/hubs", { method: "POST", body: { name } });
            router.push(`/hubs/${hub.id}`);
          }, { navigates: true });
        }}
      >
        <div className="flex-1">
          <TextInput label="Hub name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. Platform team" />
        </div>
        <Button type="submit" variant="primary" busy={busy}>
          Create hub
        </Button>
      </form>
      <div className="mt-3">
        <ErrorNotice error={error} />
      </div>
    </Card>
  );
}
