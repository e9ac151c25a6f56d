"use client";

import Link from "next/link";
import type { CitedSource } from "./cited-text.tsx";

/** A citation as chat, ask and board answers carry it. */
export interface Citation {
  index: number;
  memory_id: string;
  title: string;
}

/** Resolves an answer's [n] for `CitedText` from its citations (numbered by `index`, not by position). */
export function citedSource(citations: Citation[]) {
  return (n: number): CitedSource | undefined => {
    const cited = citations.find((c) => c.index === n);
    return cited && { id: cited.memory_id, title: cited.title };
  };
}

/** The memories an answer cites, numbered as its [n] markers are. */
export function SourceList({ citations }: { citations: Citation[] }) {
  if (citations.length === 0) return null;
  return (
    <ol aria-label="Sources" className="flex flex-col gap-1 border-t border-slate-100 pt-2 text-xs text-slate-600">
      {citations.map((c) => (
        <li key={c.index} className="flex items-center gap-2">
          <span className="font-semibold">[{c.index}]</span>
          <Link prefetch={false} href={`/memories/${c.memory_id}`} className="truncate text-indigo-700 hover:underline">
            {c.title}
          </Link>
        </li>
      ))}
    </ol>
  );
}
