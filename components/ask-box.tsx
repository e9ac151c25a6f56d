"use client";

import Link from "next/link";
import { useRef, useState } from "react";
import { errorMessage } from "@/lib/web/api.ts";
import { readSse } from "@/lib/web/read-sse.ts";
import { CitedText } from "./cited-text.tsx";
import { Badge, Button } from "./ui.tsx";

interface Source {
  id: string;
  title: string;
  kind: string;
  age: string;
  relevance_score: number;
}

interface Done {
  model: string;
  tokens: number;
  metadata?: { total_latency_ms?: number };
}

/** Ask a question of the hub's memories; the answer streams in with clickable citations. */
export function AskBox({ hubId }: { hubId: string }) {
  const [query, setQuery] = useState("");
  const [answer, setAnswer] = useState("");
  const [sources, setSources] = useState<Source[]>([]);
  const [done, setDone] = useState<Done>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const controller = useRef<AbortController | null>(null);

  const ask = async () => {
    controller.current?.abort();
    const abort = new AbortController();
    controller.current = abort;
    setBusy(true);
    setAnswer("");
    setSources([]);
    setDone(undefined);
    setError(undefined);
    try {
      const res = await fetch("/v1/ask", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream", "x-hub-id": hubId },
        body: JSON.stringify({ query }),
        credentials: "same-origin",
        signal: abort.signal,
      });
      if (!res.ok || !res.body) {
        const payload = (await res.json().catch(() => undefined)) as { error?: { message?: string } } | undefined;
        throw new Error(payload?.error?.message ?? `The server answered ${res.status}`);
      }
      await readSse(res.body, (event, data) => {
        if (event === "sources") setSources(data as Source[]);
        else if (event === "delta") setAnswer((current) => current + (data as { text: string }).text);
        else if (event === "done") setDone(data as Done);
        else if (event === "error") setError((data as { message: string }).message);
      });
    } catch (caught) {
      if ((caught as Error).name !== "AbortError") setError(errorMessage(caught));
    } finally {
      if (controller.current === abort) setBusy(false);
    }
  };

  return (
    <section aria-labelledby="ask-heading" className="rounded-lg border border-slate-200 bg-white p-4 shadow-sm">
      <h2 id="ask-heading" className="mb-3 text-base font-semibold">
        Ask
      </h2>
      <form
        className="flex flex-col gap-2 sm:flex-row"
        onSubmit={(event) => {
          event.preventDefault();
          if (query.trim()) void ask();
        }}
      >
        <label htmlFor="ask-query" className="sr-only">
          Your question
        </label>
        <input
          id="ask-query"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
          placeholder="Ask a question; the answer cites your memories…"
          maxLength={2000}
          className="min-w-0 flex-1 rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm"
        />
        <Button type="submit" variant="primary" busy={busy}>
          Ask
        </Button>
      </form>
      <div aria-live="polite" className="mt-3 flex flex-col gap-2">
        {error && <p className="rounded-md bg-red-50 px-3 py-2 text-sm text-red-700">{error}</p>}
        {answer && <CitedText testId="ask-answer" text={answer} source={(n) => sources[n - 1]} />}
        {sources.length > 0 && (
          <ol className="flex flex-col gap-1 text-xs text-slate-600">
            {sources.slice(0, 5).map((source, i) => (
              <li key={source.id} className="flex items-center gap-2">
                <span className="font-semibold">[{i + 1}]</span>
                <Link prefetch={false} href={`/memories/${source.id}`} className="truncate text-indigo-700 hover:underline">
                  {source.title}
                </Link>
                <Badge>{source.kind}</Badge>
                <span>{source.age}</span>
              </li>
            ))}
          </ol>
        )}
        {done && (
          <p className="text-xs text-slate-500">
            {done.model}
            {done.metadata?.total_latency_ms !== undefined ? ` · ${Math.round(done.metadata.total_latency_ms)} ms` : ""}
          </p>
        )}
      </div>
    </section>
  );
}
