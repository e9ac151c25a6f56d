"use client";

import Link from "next/link";
import { useState } from "react";
import { useAction } from "@/lib/web/use-action.ts";
import { api } from "@/lib/web/api.ts";
import type { RecallResult } from "@/lib/web/types.ts";
import { Badge, Button, ErrorNotice, LoadingRows } from "./ui.tsx";

const KINDS = ["", "episodic", "semantic", "procedural", "rationale"];

/** Semantic recall across this hub; results render in place of a same-height placeholder. */
export function RecallBox({ hubId }: { hubId: string }) {
  const [query, setQuery] = useState("");
  const [kind, setKind] = useState("");
  const { busy, error, run } = useAction();
  const [result, setResult] = useState<RecallResult>();
  const [asked, setAsked] = useState("");

  return (
    <section aria-labelledby="recall-heading" className="rounded-lg border border-slate-200 bg-white p-4 shadow-sm">
      <h2 id="recall-heading" className="mb-3 text-base font-semibold">
        Recall
      </h2>
      <form
        role="search"
        className="flex flex-col gap-2 sm:flex-row"
        onSubmit={async (event) => {
          event.preventDefault();
          if (!query.trim()) return;
          await run(async () => {
            setResult(await api<RecallResult>("/v1/recall", { method: "POST", body: { query, hub_ids: [hubId], limit: 10, ...(kind && { kind }) } }));
            setAsked(query);
          });
        }}
      >
        <label htmlFor="recall-query" className="sr-only">
          What do you want to recall?
        </label>
        <input
          id="recall-query"
          type="search"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
          placeholder="Ask about anything in this hub…"
          maxLength={2000}
          className="min-w-0 flex-1 rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm"
        />
        <label htmlFor="recall-kind" className="sr-only">
          Kind
        </label>
        <select id="recall-kind" value={kind} onChange={(e) => setKind(e.target.value)} className="rounded-md border border-slate-300 bg-white px-2 py-2 text-sm">
          {KINDS.map((k) => (
            <option key={k} value={k}>
              {k || "All kinds"}
            </option>
          ))}
        </select>
        <Button type="submit" variant="primary" busy={busy}>
          Recall
        </Button>
      </form>
      <div aria-live="polite" className="mt-3">
        <ErrorNotice error={error} />
        {busy ? (
          <LoadingRows rows={3} height="h-24" label="Recalling…" />
        ) : result ? (
          result.memories.length === 0 ? (
            <p className="rounded-md bg-slate-50 px-3 py-4 text-sm text-slate-600">Nothing relevant found for “{asked}”.</p>
          ) : (
            <>
              <p className="mb-2 text-xs text-slate-500">
                {result.memories.length} result{result.memories.length === 1 ? "" : "s"} · intent {result.query_metadata.intent} ·{" "}
                {result.query_metadata.latency_ms} ms{result.query_metadata.reranked ? " · reranked" : ""}
              </p>
              <ol className="flex flex-col gap-2">
                {result.memories.map((memory) => (
                  <li key={memory.id} className="rounded-md border border-slate-200 p-3">
                    <div className="flex flex-wrap items-center gap-2">
                      <Link prefetch={false} href={`/memories/${memory.id}`} className="font-medium text-indigo-700 hover:underline">
                        {memory.title}
                      </Link>
                      <Badge tone="indigo" title="Relevance score (0 to 1)">
                        {memory.relevance_score.toFixed(2)}
                      </Badge>
                      <Badge>{memory.kind}</Badge>
                      <span className="text-xs text-slate-500">{memory.age}</span>
                    </div>
                    {memory.heading_chain && <p className="mt-1 text-xs text-slate-500">{memory.heading_chain}</p>}
                    <p className="mt-1 line-clamp-3 whitespace-pre-line text-sm text-slate-700">{memory.chunk_content}</p>
                  </li>
                ))}
              </ol>
            </>
          )
        ) : null}
      </div>
    </section>
  );
}
