"use client";

import { formatDate } from "@/lib/web/format.ts";
import type { SlotVersion } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { CitedText } from "./cited-text.tsx";
import { FeedbackTally } from "./feedback-tally.tsx";
import { SourceList, citedSource } from "./source-list.tsx";
import { ErrorNotice, LoadingRows } from "./ui.tsx";

/** A board card's earlier answers, newest first; loaded only once its disclosure is opened. */
export function BoardHistory({ hubId, slotKey }: { hubId: string; slotKey: string }) {
  const history = useApi<{ versions: SlotVersion[] }>(`/v1/hubs/${encodeURIComponent(hubId)}/board/slots/${encodeURIComponent(slotKey)}/history`);
  if (history.error) return <ErrorNotice error={history.error} onRetry={history.reload} />;
  if (!history.data) return <LoadingRows rows={1} height="h-10" label="Loading earlier answers…" />;
  if (history.data.versions.length === 0) return <p className="text-xs text-slate-500">No earlier answers: this is the first.</p>;
  return (
    <ol className="flex flex-col gap-3" aria-label="Earlier answers">
      {history.data.versions.map((version) => (
        <li key={version.id} className="flex flex-col gap-1 rounded-md border border-slate-100 bg-slate-50 p-2">
          <p className="text-xs text-slate-500">
            Written {formatDate(version.content_produced_at)}, replaced {formatDate(version.archived_at)}
            {version.feedback.accurate + version.feedback.inaccurate > 0 && " · "}
            <FeedbackTally feedback={version.feedback} />
          </p>
          <CitedText text={version.payload.answer} source={citedSource(version.payload.citations)} />
          <SourceList citations={version.payload.citations} />
        </li>
      ))}
    </ol>
  );
}
