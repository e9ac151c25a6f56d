"use client";

import { useState } from "react";
import { useAction } from "@/lib/web/use-action.ts";
import { api } from "@/lib/web/api.ts";
import type { Memory } from "@/lib/web/types.ts";
import { Markdown } from "./markdown.tsx";
import { Button, ErrorNotice, TextInput } from "./ui.tsx";

export function parseTags(raw: string): string[] {
  return [...new Set(raw.split(",").map((tag) => tag.trim()).filter(Boolean))];
}

/** Markdown editor (write / preview) that pushes into this hub. */
export function PushMemory({ hubId, onPushed, disabled }: { hubId: string; onPushed: (memory: Memory) => void; disabled?: boolean }) {
  const [open, setOpen] = useState(false);
  const [title, setTitle] = useState("");
  const [tags, setTags] = useState("");
  const [content, setContent] = useState("");
  const [tab, setTab] = useState<"write" | "preview">("write");
  const { busy, error, run } = useAction();

  if (!open) {
    return (
      <Button variant="primary" disabled={disabled} onClick={() => setOpen(true)}>
        Push a memory
      </Button>
    );
  }
  return (
    <section aria-labelledby="push-heading" className="rounded-lg border border-slate-200 bg-white p-4 shadow-sm">
      <h2 id="push-heading" className="mb-3 text-base font-semibold">
        Push a memory
      </h2>
      <form
        className="flex flex-col gap-3"
        onSubmit={async (event) => {
          event.preventDefault();
          await run(async () => {
            const memory = await api<Memory>("/v1/memories", {
              method: "POST",
              hubId,
              body: {
                content,
                content_type: "markdown",
                source: "web",
                initiation_type: "human_direct",
                ...(title.trim() && { title: title.trim() }),
                ...(parseTags(tags).length > 0 && { tags: parseTags(tags) }),
              },
            });
            setTitle("");
            setTags("");
            setContent("");
            setTab("write");
            setOpen(false);
            onPushed(memory);
          });
        }}
      >
        <div className="grid gap-3 sm:grid-cols-2">
          <TextInput label="Title (optional)" maxLength={200} value={title} onChange={(e) => setTitle(e.target.value)} hint="Taken from the first heading when empty." />
          <TextInput label="Tags (optional)" value={tags} onChange={(e) => setTags(e.target.value)} hint="Comma-separated." />
        </div>
        <div>
          <div role="tablist" aria-label="Editor mode" className="mb-2 flex gap-1">
            {(["write", "preview"] as const).map((mode) => (
              <button
                key={mode}
                type="button"
                role="tab"
                aria-selected={tab === mode}
                onClick={() => setTab(mode)}
                className={`rounded-md px-3 py-1 text-sm font-medium ${tab === mode ? "bg-slate-200 text-slate-900" : "text-slate-600 hover:bg-slate-100"}`}
              >
                {mode === "write" ? "Write" : "Preview"}
              </button>
            ))}
          </div>
          {tab === "write" ? (
            <>
              <label htmlFor="memory-content" className="sr-only">
                Content (markdown)
              </label>
              <textarea
                id="memory-content"
                required
                rows={10}
                value={content}
                onChange={(e) => setContent(e.target.value)}
                placeholder={"# Heading\n\nWhat should be remembered…"}
                className="w-full rounded-md border border-slate-300 px-3 py-2 font-mono text-sm shadow-sm"
              />
            </>
          ) : (
            <div className="min-h-[15rem] rounded-md border border-slate-200 p-3">
              {content.trim() ? <Markdown>{content}</Markdown> : <p className="text-sm text-slate-500">Nothing to preview yet.</p>}
            </div>
          )}
        </div>
        <ErrorNotice error={error} />
        <div className="flex justify-end gap-2">
          <Button onClick={() => setOpen(false)}>Cancel</Button>
          <Button type="submit" variant="primary" busy={busy} disabled={!content.trim()}>
            Push memory
          </Button>
        </div>
      </form>
    </section>
  );
}
