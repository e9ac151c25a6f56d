"use client";

import { api } from "@/lib/web/api.ts";
import { formatDate } from "@/lib/web/format.ts";
import type { Page } from "@/lib/web/types.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { DisconnectList } from "./disconnect-list.tsx";
import { Badge, Button, ErrorNotice } from "./ui.tsx";

interface Grant {
  id: string;
  client_id: string;
  client_name: string;
  client_uri: string | null;
  hub_ids: string[] | null;
  all_hubs: boolean;
  scopes: string[];
  resource: string;
  created_at: string;
  last_used_at: string | null;
}

type GrantPage = Page & { grants: Grant[] };

const GRANTS_PATH = "/v1/auth/oauth-grants";
/** The largest page the list gives (its default is 20): fewer round trips for a long list. */
const GRANTS_PAGE = 100;

/**
 * Apps signed in through OAuth (MCP clients): what each reaches, and a way to disconnect it. The
 * list is paginated (100 a page) and apps are not bounded per user (10 grants per app), so the
 * pages after the first are read on demand.
 */
export function ConnectedApps() {
  const grants = useApi<GrantPage>(`${GRANTS_PATH}?limit=${GRANTS_PAGE}`);
  const more = useAction();
  const showMore = () =>
    more.run(async () => {
      const next = await api<GrantPage>(`${GRANTS_PATH}?limit=${GRANTS_PAGE}&cursor=${encodeURIComponent(grants.data!.next_cursor)}`);
      grants.setData((page) => page && { ...next, grants: [...page.grants, ...next.grants.filter((g) => !page.grants.some((p) => p.id === g.id))] });
    });
  return (
    <DisconnectList
      title="Connected apps"
      items={grants.data?.grants}
      error={grants.error}
      reload={grants.reload}
      loadingLabel="Loading connected apps…"
      empty={{ title: "No connected apps", body: "MCP clients you sign in to Engram (Claude, Cursor, ChatGPT…) appear here." }}
      testId="connected-apps"
      describe={(grant) => (
        <>
          <p className="flex items-center gap-2 font-medium">
            {grant.client_name}
            <Badge tone={grant.scopes.includes("write") ? "amber" : "slate"}>{grant.scopes.includes("write") ? "read & write" : "read only"}</Badge>
          </p>
          <p className="text-xs text-slate-500">
            {grant.all_hubs ? "all hubs" : `${grant.hub_ids?.length ?? 0} hub${grant.hub_ids?.length === 1 ? "" : "s"}`} · {grant.resource} · connected{" "}
            {formatDate(grant.created_at)} · last used {formatDate(grant.last_used_at)}
          </p>
        </>
      )}
      name={(grant) => grant.client_name}
      confirmTitle={(grant) => `Disconnect “${grant.client_name}”?`}
      confirmLabel="Disconnect"
      confirmBody="Its access and refresh tokens stop working on its next request; it has to sign in again."
      disconnect={async (grant) => {
        await api(`${GRANTS_PATH}/${grant.id}`, { method: "DELETE" });
        // Dropped in place rather than reloaded: a reload reads the first page only, losing the pages shown after it.
        grants.setData((page) => page && { ...page, grants: page.grants.filter((g) => g.id !== grant.id) });
      }}
      footer={
        <>
          {grants.data?.has_more && (
            <Button variant="ghost" className="mt-2" busy={more.busy} onClick={showMore}>
              Show more connected apps
            </Button>
          )}
          <ErrorNotice error={more.error} />
        </>
      }
    />
  );
}
