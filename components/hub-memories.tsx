"use client";

import dynamic from "next/dynamic";
import Link from "next/link";
import { useEffect, useState } from "react";
import { api } from "@/lib/web/api.ts";
import { formatAge, plural } from "@/lib/web/format.ts";
import { HUB_PAGE_SIZE, roleCan, type Memory, type Page, type Topic, type TopicNode, type TopicTree } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { useHub } from "./hub-frame.tsx";
import { isProcessing, ProcessingBadge } from "./memory-badges.tsx";
import { PushMemory } from "./push-memory.tsx";
import { RecallBox } from "./recall-box.tsx";
// Secondary panels load after the list: they are not needed for the first content.
const UploadFiles = dynamic(() => import("./upload-files.tsx").then((m) => m.UploadFiles), { ssr: false });
const AskBox = dynamic(() => import("./ask-box.tsx").then((m) => m.AskBox), { ssr: false });
import { useLiveEvents } from "@/lib/web/live-events.tsx";
import { Badge, Button, EmptyState, ErrorNotice, LoadingRows, Notice } from "./ui.tsx";

const POLL_MS = 3000;
export type MemoryPage = Page & { memories: Memory[]; total: number };

/** `initial`: the first page (newest, no topic) as the server read it. */
export function HubMemories({ initial }: { initial?: MemoryPage }) {
  const { hubId, data: hub, reload: reloadHub } = useHub();
  const [sort, setSort] = useState<"newest" | "relevant">("newest");
  const [topicId, setTopicId] = useState("");
  // Cursor stack: the cursors of the pages before the current one, for Previous.
  const [cursors, setCursors] = useState<string[]>([]);
  const [cursor, setCursor] = useState("");
  const [pushed, setPushed] = useState<Memory>();
  const params = new URLSearchParams({ hub_id: hubId, limit: String(HUB_PAGE_SIZE), sort });
  if (topicId) params.set("topic_id", topicId);
  if (cursor) params.set("cursor", cursor);
  const list = useApi<MemoryPage>(`/v1/memories?${params}`, initial);
  const topics = useTopics(hubId);
  const { reload } = list;
  // Another person's push, edit, move or delete shows up without a reload.
  useLiveEvents(["memory.*", "hub.updated"], () => {
    reload();
    reloadHub();
  }, { hubId });

  const pending = list.data?.memories.some(isProcessing) ?? false;
  useEffect(() => {
    if (!pending) return;
    const timer = setTimeout(reload, POLL_MS);
    return () => clearTimeout(timer);
  }, [pending, reload, list.data]);

  const restart = () => {
    setCursors([]);
    setCursor("");
  };

  return (
    <div className="flex flex-col gap-5">
      <AskBox hubId={hubId} />
      <RecallBox hubId={hubId} />
      {/* Shown (disabled) while the role loads so the list below does not jump when it arrives. */}
      {(!hub || roleCan(hub.role, "write")) && (
        <div className="flex flex-col items-start gap-2 [&>*]:w-full sm:[&>button]:w-auto">
          <PushMemory
            hubId={hubId}
            disabled={!hub}
            onPushed={(memory) => {
              setPushed(memory);
              restart();
              setSort("newest");
              reload();
              reloadHub();
            }}
          />
          {pushed && <Notice>Pushed “{pushed.title}”. It is searchable now; its summary and embeddings follow in a few seconds.</Notice>}
          <UploadFiles
            hubId={hubId}
            disabled={!hub}
            onUploaded={() => {
              restart();
              setSort("newest");
              reload();
              reloadHub();
            }}
          />
        </div>
      )}
      <section aria-labelledby="memories-heading">
        <div className="mb-3 flex flex-wrap items-end justify-between gap-3">
          <h2 id="memories-heading" className="text-base font-semibold">
            Memories{list.data ? <span className="ml-2 text-sm font-normal text-slate-500">{list.data.total.toLocaleString()} total</span> : null}
          </h2>
          <div className="flex flex-wrap gap-2">
            <label className="flex items-center gap-2 text-sm text-slate-700">
              Sort
              <select
                value={sort}
                onChange={(e) => {
                  setSort(e.target.value as "newest" | "relevant");
                  restart();
                }}
                className="rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm"
              >
                <option value="newest">Newest</option>
                <option value="relevant">Most used</option>
              </select>
            </label>
            {topics.length > 0 && (
              <label className="flex items-center gap-2 text-sm text-slate-700">
                Topic
                <select
                  value={topicId}
                  onChange={(e) => {
                    setTopicId(e.target.value);
                    restart();
                  }}
                  className="max-w-[12rem] rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm"
                >
                  <option value="">All topics</option>
                  {topics.map((topic) => (
                    <option key={topic.id} value={topic.id}>
                      {topic.name}
                    </option>
                  ))}
                </select>
              </label>
            )}
          </div>
        </div>
        {list.error && !list.data ? (
          <ErrorNotice error={list.error} onRetry={list.reload} />
        ) : !list.data ? (
          <LoadingRows rows={8} height="h-[4.75rem]" label="Loading memories…" />
        ) : list.data.memories.length === 0 ? (
          <EmptyState title={topicId ? "No memories in this topic" : "No memories yet"}>
            {roleCan(hub?.role, "write") ? "Push one above, or send one from an agent with the API." : "Memories pushed to this hub will show up here."}
          </EmptyState>
        ) : (
          <>
            {list.error && <ErrorNotice error={list.error} onRetry={list.reload} />}
            <ul className="flex flex-col gap-2" aria-busy={list.loading}>
              {list.data.memories.map((memory) => (
                <MemoryRow key={memory.id} memory={memory} />
              ))}
            </ul>
            <nav aria-label="Pages" className="mt-4 flex items-center justify-between gap-2">
              <Button
                disabled={cursors.length === 0 || list.loading}
                onClick={() => {
                  setCursor(cursors[cursors.length - 1] ?? "");
                  setCursors(cursors.slice(0, -1));
                }}
              >
                ← Newer
              </Button>
              <span className="text-sm text-slate-500">Page {cursors.length + 1}</span>
              <Button
                disabled={!list.data.has_more || list.loading}
                onClick={() => {
                  setCursors([...cursors, cursor]);
                  setCursor(list.data!.next_cursor);
                }}
              >
                Older →
              </Button>
            </nav>
          </>
        )}
      </section>
    </div>
  );
}

function MemoryRow({ memory }: { memory: Memory }) {
  return (
    <li data-testid="memory-row" className="flex h-[4.75rem] flex-col justify-center gap-1 overflow-hidden rounded-lg border border-slate-200 bg-white px-4 shadow-sm">
      <div className="flex min-w-0 items-center gap-2">
        <Link prefetch={false} href={`/memories/${memory.id}`} className="truncate font-medium text-indigo-700 hover:underline">
          {memory.title}
        </Link>
        <ProcessingBadge memory={memory} />
      </div>
      <div className="flex min-w-0 items-center gap-2 overflow-hidden whitespace-nowrap text-xs text-slate-500">
        <Badge>{memory.kind}</Badge>
        <span>{memory.stability}</span>
        <span aria-hidden>·</span>
        <time dateTime={memory.created_at} title={memory.created_at} suppressHydrationWarning>
          {formatAge(memory.created_at)}
        </time>
        <span aria-hidden>·</span>
        <span>{plural(memory.access_count, "read")}</span>
        {memory.tags.slice(0, 4).map((tag) => (
          <span key={tag} className="rounded bg-slate-100 px-1.5 py-0.5 text-slate-600">
            #{tag}
          </span>
        ))}
      </div>
    </li>
  );
}

/** The tree flattened in display order, each topic named by its path ("Backend / Deploys"). */
function flattenTopics(nodes: TopicNode[], prefix = ""): Topic[] {
  return nodes.flatMap((node) => {
    const name = prefix ? `${prefix} / ${node.name}` : node.name;
    return [{ id: node.id, name }, ...flattenTopics(node.children, name)];
  });
}

/** Topics of the hub for the filter (the whole tree, one request); the filter hides itself when there are none. */
function useTopics(hubId: string): Topic[] {
  const [topics, setTopics] = useState<Topic[]>([]);
  useEffect(() => {
    const controller = new AbortController();
    api<TopicTree>(`/v1/topics?hub_id=${encodeURIComponent(hubId)}`, { signal: controller.signal, hubId })
      .then((data) => setTopics(flattenTopics(data.topics)))
      .catch(() => setTopics([]));
    return () => controller.abort();
  }, [hubId]);
  return topics;
}
