"use client";

import { useEffect, useState } from "react";
import { apiPath } from "@/lib/web/api.ts";
import { formatDate } from "@/lib/web/format.ts";
import type { OutboxMail, Page } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { Badge, Button, Card, EmptyState, ErrorNotice, LoadingRows } from "./ui.tsx";

const STATUS_TONE = { sent: "emerald", failed: "red", logged: "slate" } as const;
const STATUS_HINT = {
  sent: "Accepted by the mail server",
  failed: "The mail server refused it; see the error",
  logged: "Not sent: this server has no SMTP_URL, so mail is kept here and in the server log",
} as const;

/**
 * The hub's mail outbox: what invites by e-mail sent, or would have sent without SMTP. `version`
 * is bumped after an invite action (which may have sent mail) and reloads the list.
 */
export function HubMail({ hubId, version = 0 }: { hubId: string; version?: number }) {
  const [cursor, setCursor] = useState("");
  const mail = useApi<Page & { mail: OutboxMail[] }>(apiPath`/v1/hubs/${hubId}/mail` + `?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
  const { reload } = mail;
  useEffect(() => {
    if (version > 0) reload();
  }, [version, reload]);
  return (
    <Card title="Mail outbox" actions={<Button variant="ghost" onClick={mail.reload}>Refresh</Button>}>
      {mail.error && !mail.data ? (
        <ErrorNotice error={mail.error} onRetry={mail.reload} />
      ) : !mail.data ? (
        <LoadingRows rows={2} height="h-10" label="Loading mail…" />
      ) : mail.data.mail.length === 0 ? (
        <EmptyState title="No mail yet">Invites created with an e-mail address show up here.</EmptyState>
      ) : (
        <ul className="divide-y divide-slate-100" data-testid="mail-outbox">
          {mail.data.mail.map((message) => (
            <li key={message.id} className="py-2">
              <details>
                <summary className="flex cursor-pointer flex-wrap items-center gap-2 text-sm">
                  <Badge tone={STATUS_TONE[message.status]} title={STATUS_HINT[message.status]}>
                    {message.status}
                  </Badge>
                  <span className="text-slate-700">{message.to}</span>
                  <span className="min-w-0 flex-1 truncate text-slate-500">{message.subject}</span>
                  <span className="text-xs text-slate-500">{formatDate(message.created_at)}</span>
                </summary>
                {message.error && <p className="mt-2 text-xs text-red-700">{message.error}</p>}
                <pre className="mt-2 whitespace-pre-wrap rounded-md bg-slate-50 p-2 font-mono text-xs text-slate-700">{message.body}</pre>
              </details>
            </li>
          ))}
        </ul>
      )}
      {(cursor || mail.data?.has_more) && (
        <div className="mt-3 flex justify-between">
          <Button disabled={!cursor} onClick={() => setCursor("")}>
            Newest
          </Button>
          <Button disabled={!mail.data?.has_more} onClick={() => setCursor(mail.data!.next_cursor)}>
            Older mail →
          </Button>
        </div>
      )}
    </Card>
  );
}
