"use client";

import Link from "next/link";
import { Fragment } from "react";

export interface CitedSource {
  id: string;
  title: string;
}

/**
 * Answer text with each [n] as a link to the memory it cites. `source(n)` resolves a marker; one it
 * cannot resolve (the stream is still running, or the number is out of range) stays plain text.
 */
export function CitedText({ text, source, testId }: { text: string; source: (n: number) => CitedSource | undefined; testId?: string }) {
  const parts = text.split(/(\[\d+\])/g);
  return (
    <p data-testid={testId} className="whitespace-pre-line text-sm leading-6 text-slate-800">
      {parts.map((part, i) => {
        const cited = /^\[(\d+)\]$/.exec(part);
        const found = cited ? source(Number(cited[1])) : undefined;
        return found ? (
          <Link key={i} prefetch={false} href={`/memories/${found.id}`} title={found.title} className="mx-0.5 rounded bg-indigo-50 px-1 text-xs font-semibold text-indigo-700 hover:underline">
            {part}
          </Link>
        ) : (
          <Fragment key={i}>{part}</Fragment>
        );
      })}
    </p>
  );
}
