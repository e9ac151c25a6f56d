"use client";

import { useState } from "react";
import { api } from "@/lib/web/api.ts";
import { formatAge } from "@/lib/web/format.ts";
import type { ChatSession, ChatSessionPage } from "@/lib/web/types.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { ChatConversation } from "./chat-conversation.tsx";
import { Badge, Button, Card, ConfirmDialog, EmptyState, ErrorNotice, LoadingRows, PageHeader, TextInput } from "./ui.tsx";

const SESSIONS_PATH = "/v1/chat/sessions?limit=30";
const titleOf = (session: ChatSession) => session.title || "New chat";

/** Chats with the agent over all your hubs: the list of sessions, and the selected conversation. */
export function ChatPage() {
  const list = useApi<ChatSessionPage>(SESSIONS_PATH);
  const [selectedId, setSelectedId] = useState<string>();
  const creating = useAction();
  const older = useAction();
  const sessions = list.data?.sessions ?? [];
  // Until one is picked, the most recently active chat is open.
  const selected = sessions.find((s) => s.id === selectedId) ?? (selectedId === undefined ? sessions[0] : undefined);

  const newChat = () =>
    creating.run(async () => {
      const session = await api<ChatSession>("/v1/chat/sessions", { method: "POST", body: { scope_type: "user_all_hubs" } });
      list.setData((page) => page && { ...page, sessions: [session, ...page.sessions] });
      setSelectedId(session.id);
    });

  const showOlder = () =>
    older.run(async () => {
      const next = await api<ChatSessionPage>(`${SESSIONS_PATH}&cursor=${encodeURIComponent(list.data!.next_cursor)}`);
      list.setData((page) => page && { ...next, sessions: [...page.sessions, ...next.sessions.filter((s) => !page.sessions.some((p) => p.id === s.id))] });
    });

  return (
    <>
      <PageHeader
        title="Chat"
        subtitle="Ask the agent about anything in your hubs; answers cite the memories they come from."
        actions={
          <Button variant="primary" busy={creating.busy} onClick={newChat}>
            New chat
          </Button>
        }
      />
      <ErrorNotice error={creating.error} />
      <div className="mt-3 grid gap-5 lg:grid-cols-[16rem_1fr]">
        <nav aria-label="Chats" className="flex flex-col gap-2">
          {list.error && !list.data ? (
            <ErrorNotice error={list.error} onRetry={list.reload} />
          ) : !list.data ? (
            <LoadingRows rows={3} height="h-12" label="Loading chats…" />
          ) : sessions.length === 0 ? (
            <EmptyState title="No chats yet">Start one with New chat.</EmptyState>
          ) : (
            <ul className="flex flex-col gap-1" data-testid="chat-sessions">
              {sessions.map((session) => (
                <li key={session.id}>
                  <button
                    type="button"
                    onClick={() => setSelectedId(session.id)}
                    aria-current={session.id === selected?.id ? "true" : undefined}
                    className={`flex w-full flex-col rounded-md px-3 py-2 text-left text-sm ${session.id === selected?.id ? "bg-indigo-50 text-indigo-800" : "text-slate-700 hover:bg-slate-100"}`}
                  >
                    <span className="truncate font-medium">{titleOf(session)}</span>
                    <span className="flex items-center gap-2 text-xs text-slate-500">
                      {formatAge(session.last_message_at ?? session.created_at)}
                      {session.status !== "idle" && <Badge tone={session.status === "awaiting_approval" ? "amber" : "indigo"}>{session.status.replace("_", " ")}</Badge>}
                    </span>
                  </button>
                </li>
              ))}
            </ul>
          )}
          {list.data?.has_more && (
            <Button variant="ghost" busy={older.busy} onClick={showOlder}>
              Show older chats
            </Button>
          )}
          <ErrorNotice error={older.error} />
        </nav>
        <div className="min-w-0">
          {selected ? (
            <Card>
              <div className="mb-3 flex flex-wrap items-start justify-between gap-2">
                <SessionTitle
                  key={`${selected.id}:${selected.title}`}
                  session={selected}
                  onSaved={(s) => list.setData((page) => page && { ...page, sessions: page.sessions.map((p) => (p.id === s.id ? s : p)) })}
                />
                <DeleteSession
                  session={selected}
                  onDeleted={() => {
                    list.setData((page) => page && { ...page, sessions: page.sessions.filter((p) => p.id !== selected.id) });
                    setSelectedId(undefined);
                  }}
                />
              </div>
              <ChatConversation key={selected.id} sessionId={selected.id} onChanged={list.reload} />
            </Card>
          ) : list.data && sessions.length > 0 ? (
            <EmptyState title="Pick a chat">Or start a new one.</EmptyState>
          ) : null}
        </div>
      </div>
    </>
  );
}

/** The chat's title, renamed in place (the server names a chat after its first message until then). */
function SessionTitle({ session, onSaved }: { session: ChatSession; onSaved: (session: ChatSession) => void }) {
  const [editing, setEditing] = useState(false);
  const [title, setTitle] = useState(session.title);
  const { busy, error, run } = useAction();
  if (!editing) {
    return (
      <div className="flex min-w-0 items-center gap-2">
        <h2 className="truncate text-base font-semibold">{titleOf(session)}</h2>
        <Button variant="ghost" className="text-xs" onClick={() => setEditing(true)} aria-label={`Rename ${titleOf(session)}`}>
          Rename
        </Button>
      </div>
    );
  }
  return (
    <form
      className="flex flex-wrap items-end gap-2"
      onSubmit={(event) => {
        event.preventDefault();
        void run(async () => {
          onSaved(await api<ChatSession>(`/v1/chat/sessions/${session.id}`, { method: "PATCH", body: { title: title.trim() } }));
          setEditing(false);
        });
      }}
    >
      <TextInput label="Chat title" value={title} maxLength={200} onChange={(e) => setTitle(e.target.value)} autoFocus />
      <Button type="submit" variant="primary" busy={busy}>
        Save
      </Button>
      <Button onClick={() => setEditing(false)}>Cancel</Button>
      <ErrorNotice error={error} />
    </form>
  );
}

function DeleteSession({ session, onDeleted }: { session: ChatSession; onDeleted: () => void }) {
  const [open, setOpen] = useState(false);
  const { busy, error, run } = useAction();
  return (
    <>
      <Button variant="ghost" onClick={() => setOpen(true)}>
        Delete
      </Button>
      <ConfirmDialog
        open={open}
        title={`Delete “${titleOf(session)}”?`}
        confirmLabel="Delete chat"
        busy={busy}
        error={error}
        onClose={() => setOpen(false)}
        onConfirm={() =>
          run(async () => {
            await api(`/v1/chat/sessions/${session.id}`, { method: "DELETE" });
            setOpen(false);
            onDeleted();
          })
        }
      >
        The conversation is removed from your chats. Memories it saved stay in their hubs.
      </ConfirmDialog>
    </>
  );
}
