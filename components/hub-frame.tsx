"use client";

import Link from "next/link";
import { usePathname } from "next/navigation";
import { createContext, useContext, useEffect, type ReactNode } from "react";
import { api } from "@/lib/web/api.ts";
import { plural } from "@/lib/web/format.ts";
import { roleCan, type HubDetail } from "@/lib/web/types.ts";
import { useApi, type ApiState } from "@/lib/web/use-api.ts";
import { useMe } from "./app-shell.tsx";
import { ErrorNotice, RoleBadge } from "./ui.tsx";

const HubContext = createContext<(ApiState<HubDetail> & { hubId: string }) | null>(null);

/** The hub detail, loaded once for all of a hub's tabs. */
export function useHub() {
  const value = useContext(HubContext);
  if (!value) throw new Error("useHub outside HubFrame");
  return value;
}

export function HubFrame({ hubId, initial, children }: { hubId: string; initial?: HubDetail; children: ReactNode }) {
  const state = useApi<HubDetail>(`/v1/hubs/${encodeURIComponent(hubId)}`, initial);
  const pathname = usePathname();
  const me = useMe();
  useEffect(() => {
    // Read receipt for hub notifications, sent after the page's own data so it never delays it;
    // failing to record it must not disturb the page.
    const timer = setTimeout(() => api(`/v1/hubs/${encodeURIComponent(hubId)}/visit`, { method: "POST" }).catch(() => undefined), 1500);
    return () => clearTimeout(timer);
  }, [hubId]);

  const detail = state.data;
  const base = `/hubs/${hubId}`;
  const tabs = [
    { href: base, label: "Memories" },
    { href: `${base}/members`, label: "Members" },
    { href: `${base}/boards`, label: "Boards" },
    { href: `${base}/dreams`, label: "Dreams" },
    ...(roleCan(detail?.role, "manage") ? [{ href: `${base}/settings`, label: "Settings" }] : []),
  ];

  return (
    <HubContext.Provider value={{ ...state, hubId }}>
      <div className="mb-5 flex flex-col gap-3">
        <Link href="/hubs" className="text-sm text-indigo-700 hover:underline">
          ← All hubs
        </Link>
        {/* Fixed-height header: the name arriving must not push the page down. */}
        <div className="flex min-h-[3.5rem] flex-wrap items-center gap-x-3 gap-y-1">
          {detail ? (
            <>
              <h1 className="break-all text-2xl font-semibold">{detail.hub.name}</h1>
              <RoleBadge role={detail.role} />
              <p className="w-full text-sm text-slate-500">
                {detail.hub.hub_type === "personal" ? "Personal hub" : `/${detail.hub.slug}`} · {plural(detail.counts.memories, "memory", "memories")} ·{" "}
                {plural(detail.counts.members, "member")}
              </p>
            </>
          ) : state.error ? (
            <div className="w-full">
              <ErrorNotice error={state.error} onRetry={state.reload} />
            </div>
          ) : (
            <div role="status" className="w-full">
              <span className="sr-only">Loading hub…</span>
              <div className="h-7 w-48 animate-pulse rounded bg-slate-200" />
              <div className="mt-2 h-4 w-64 animate-pulse rounded bg-slate-200" />
            </div>
          )}
        </div>
        <nav aria-label="Hub sections" className="flex gap-1 overflow-x-auto border-b border-slate-200">
          {tabs.map((tab) => {
            const active = pathname === tab.href;
            return (
              <Link
                key={tab.href}
                href={tab.href}
                prefetch={false}
                aria-current={active ? "page" : undefined}
                className={`-mb-px whitespace-nowrap border-b-2 px-3 py-2 text-sm font-medium ${active ? "border-indigo-600 text-indigo-700" : "border-transparent text-slate-600 hover:text-slate-900"}`}
              >
                {tab.label}
              </Link>
            );
          })}
        </nav>
      </div>
      {detail?.pending_transfer?.target_user_id === me.id && pathname !== `${base}/members` && (
        <div role="status" className="mb-4 rounded-md border border-amber-300 bg-amber-50 px-3 py-2 text-sm text-amber-900">
          You have been offered ownership of this hub.{" "}
          <Link href={`${base}/members`} className="font-medium underline">
            Review the transfer
          </Link>
        </div>
      )}
      {state.error && !detail ? null : children}
    </HubContext.Provider>
  );
}
