"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import { useEffect, useState } from "react";
import { useAction } from "@/lib/web/use-action.ts";
import { api, apiPath } from "@/lib/web/api.ts";
import { formatAge, formatDate } from "@/lib/web/format.ts";
import { roleCan, type HubDetail, type HubListEntry, type MemoryWithContent } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { useMe } from "./app-shell.tsx";
import { Markdown } from "./markdown.tsx";
import { isProcessing, ProcessingBadge } from "./memory-badges.tsx";
import { parseTags } from "./push-memory.tsx";
import { Badge, Button, Card, ConfirmDialog, ErrorNotice, LoadingRows, Notice, PageHeader, TextInput } from "./ui.tsx";

export function MemoryPage({ id }: { id: string }) {
  const me = useMe();
  const memory = useApi<MemoryWithContent>(`/v1/memories/${encodeURIComponent(id)}`);
  const hub = useApi<HubDetail>(memory.data ? apiPath`/v1/hubs/${memory.data.hub_id}` : null);
  // Files and links are read in the background: follow the state until it settles.
  const waiting = memory.data ? isProcessing(memory.data) : false;
  const { reload } = memory;
  useEffect(() => {
    if (!waiting) return;
    const timer = setTimeout(reload, 2000);
    return () => clearTimeout(timer);
  }, [waiting, reload, memory.data]);

  if (memory.error && !memory.data) {
    return (
      <>
        <PageHeader title="Memory" back={{ href: "/hubs", label: "All hubs" }} />
        <ErrorNotice error={memory.error} onRetry={memory.reload} />
      </>
    );
  }
  if (!memory.data) return <LoadingRows rows={1} height="h-96" label="Loading memory…" />;

  const m = memory.data;
  const role = hub.data?.role;
  const own = m.owner_id === me.id;
  const canEdit = roleCan(role, "manage") || (own && roleCan(role, "write"));
  const policy = hub.data?.hub.contributor_delete_policy;
  const canDelete = roleCan(role, "manage") || (role === "contributor" && (policy === "any" || (policy === "own" && own)));

  return (
    <>
      <PageHeader
        title={m.title}
        back={{ href: `/hubs/${m.hub_id}`, label: hub.data ? hub.data.hub.name : "Hub" }}
        subtitle={
          <span className="flex flex-wrap items-center gap-2">
            <ProcessingBadge memory={m} />
            <Badge>{m.kind}</Badge>
            <Badge>{m.stability}</Badge>
            <span>
              {m.content_type} · v{m.version} · {formatAge(m.created_at)}
            </span>
          </span>
        }
      />
      <div className="grid gap-5 lg:grid-cols-[1fr_18rem]">
        <div className="flex min-w-0 flex-col gap-5">
          {m.summary && (
            <Card title="Summary">
              <p className="text-sm text-slate-700">{m.summary}</p>
            </Card>
          )}
          <Card>
            <Markdown>{m.content}</Markdown>
          </Card>
        </div>
        <aside className="flex flex-col gap-5">
          <Card title="Details">
            <dl className="grid grid-cols-[auto_1fr] gap-x-3 gap-y-1 text-sm">
              <dt className="text-slate-500">Tags</dt>
              <dd className="break-words">{m.tags.length ? m.tags.map((t) => `#${t}`).join(" ") : "—"}</dd>
              <dt className="text-slate-500">Source</dt>
              <dd>
                {m.source}
                {m.source_agent ? ` (${m.source_agent})` : ""}
              </dd>
              <dt className="text-slate-500">Created</dt>
              <dd>{formatDate(m.created_at)}</dd>
              <dt className="text-slate-500">Updated</dt>
              <dd>{formatDate(m.updated_at)}</dd>
              <dt className="text-slate-500">Processed</dt>
              <dd>{formatDate(m.processed_at)}</dd>
              <dt className="text-slate-500">Reads</dt>
              <dd>{m.access_count.toLocaleString()}</dd>
              <dt className="text-slate-500">Owner</dt>
              <dd className="break-words">{own ? "you" : (hub.data?.members.find((x) => x.user_id === m.owner_id)?.name ?? "another member")}</dd>
            </dl>
            {m.processing_error && <p className="mt-2 text-xs text-red-700">Processing error: {m.processing_error}</p>}
          </Card>
          {m.attachments.length > 0 && (
            <Card title="Original file">
              <ul className="flex flex-col gap-2 text-sm">
                {m.attachments.map((a) => (
                  <li key={a.id} className="flex flex-col gap-0.5">
                    <a className="break-all font-medium text-sky-700 hover:underline" href={`/v1/memories/${m.id}/attachments/${a.id}/download`} download={a.filename}>
                      Download {a.filename}
                    </a>
                    <span className="text-xs text-slate-500">
                      {a.content_type} · {formatBytes(a.size_bytes)}
                      {a.width && a.height ? ` · ${a.width}×${a.height}` : ""}
                    </span>
                  </li>
                ))}
              </ul>
            </Card>
          )}
          {hub.error && <ErrorNotice error={hub.error} onRetry={hub.reload} />}
          {canEdit && <EditMemory memory={m} onSaved={memory.reload} />}
          {canEdit && <MoveMemory memory={m} />}
          {canDelete && <DeleteMemory memory={m} />}
        </aside>
      </div>
    </>
  );
}

function EditMemory({ memory, onSaved }: { memory: MemoryWithContent; onSaved: () => void }) {
  const [title, setTitle] = useState(memory.title);
  const [tags, setTags] = useState(memory.tags.join(", "));
  const { busy, error, run } = useAction();
  const [saved, setSaved] = useState(false);
  return (
    <Card title="Edit">
      <form
        className="flex flex-col gap-3"
        onSubmit={async (event) => {
          event.preventDefault();
          setSaved(false);
          await run(async () => {
            await api(apiPath`/v1/memories/${memory.id}`, { method: "PATCH", body: { title: title.trim(), tags: parseTags(tags) } });
            setSaved(true);
            onSaved();
          });
        }}
      >
        <TextInput label="Title" required maxLength={200} value={title} onChange={(e) => setTitle(e.target.value)} />
        <TextInput label="Tags" value={tags} onChange={(e) => setTags(e.target.value)} hint="Comma-separated." />
        <ErrorNotice error={error} />
        {saved && <Notice>Saved.</Notice>}
        <Button type="submit" variant="primary" busy={busy}>
          Save
        </Button>
      </form>
    </Card>
  );
}

function MoveMemory({ memory }: { memory: MemoryWithContent }) {
  const router = useRouter();
  const hubs = useApi<HubListEntry[]>("/v1/hubs");
  const [target, setTarget] = useState("");
  const { busy, error, run } = useAction();
  const targets = (hubs.data ?? []).filter((entry) => entry.hub.id !== memory.hub_id && roleCan(entry.role, "write"));
  return (
    <Card title="Move to another hub">
      {hubs.error ? (
        <ErrorNotice error={hubs.error} onRetry={hubs.reload} />
      ) : !hubs.data ? (
        <LoadingRows rows={1} height="h-10" />
      ) : targets.length === 0 ? (
        <p className="text-sm text-slate-500">You can push to no other hub.</p>
      ) : (
        <form
          className="flex flex-col gap-3"
          onSubmit={async (event) => {
            event.preventDefault();
            await run(async () => {
              const result = await api<{ moved: number; skipped: { id: string; reason: string }[] }>("/v1/memories/batch-move", {
                method: "POST",
                body: { ids: [memory.id], hub_id: target },
              });
              if (result.moved !== 1) throw new Error(`Not moved: ${result.skipped[0]?.reason ?? "unknown reason"}`);
              router.push(`/hubs/${target}`);
            }, { navigates: true });
          }}
        >
          <label className="flex flex-col gap-1 text-sm font-medium text-slate-700">
            Destination hub
            <select required value={target} onChange={(e) => setTarget(e.target.value)} className="rounded-md border border-slate-300 bg-white px-3 py-2 text-sm font-normal">
              <option value="">Choose a hub…</option>
              {targets.map((entry) => (
                <option key={entry.hub.id} value={entry.hub.id}>
                  {entry.hub.name}
                </option>
              ))}
            </select>
          </label>
          <ErrorNotice error={error} />
          <Button type="submit" busy={busy} disabled={!target}>
            Move
          </Button>
        </form>
      )}
    </Card>
  );
}

function DeleteMemory({ memory }: { memory: MemoryWithContent }) {
  const router = useRouter();
  const [open, setOpen] = useState(false);
  const { busy, error, run } = useAction();
  return (
    <Card title="Delete">
      <Button variant="danger" onClick={() => setOpen(true)}>
        Delete memory…
      </Button>
      <ConfirmDialog
        open={open}
        title="Delete this memory?"
        confirmLabel="Delete memory"
        busy={busy}
        error={error}
        onClose={() => setOpen(false)}
        onConfirm={async () => {
          await run(async () => {
            await api(apiPath`/v1/memories/${memory.id}`, { method: "DELETE" });
            router.push(`/hubs/${memory.hub_id}`);
          }, { navigates: true });
        }}
      >
        “{memory.title}”, its chunks and attachments are removed for good. This cannot be undone.
      </ConfirmDialog>
      <p className="mt-2 text-xs text-slate-500">
        Deleted memories cannot be restored. <Link href={`/hubs/${memory.hub_id}`} className="underline">Back to the hub</Link>
      </p>
    </Card>
  );
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
