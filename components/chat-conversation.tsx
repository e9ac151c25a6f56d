"use client";

import { useCallback, useEffect, useRef, useState } from "react";
import { api, ApiClientError } from "@/lib/web/api.ts";
import { formatDate } from "@/lib/web/format.ts";
import { CHAT_FINISHED, type ChatMessage, type ChatSession, type ChatTurn, type Page } from "@/lib/web/types.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { useChatStream, type LiveTurn, type PendingApproval } from "@/lib/web/use-chat-stream.ts";
import { CitedText } from "./cited-text.tsx";
import { SourceList, citedSource } from "./source-list.tsx";
import { Badge, Button, ErrorNotice, Field, LoadingRows, Spinner } from "./ui.tsx";

/** The server's cap on one message (CHAT_LIMITS.contentChars). */
const MAX_CHARS = 16_000;

const streamUrl = (sessionId: string, messageId: string) => `/v1/chat/sessions/${sessionId}/messages/${messageId}/stream`;
const finished = (message: ChatMessage) => CHAT_FINISHED.includes(message.status);

/** The whole conversation: a session holds at most 1,000 messages, so every page is read. */
async function loadConversation(sessionId: string): Promise<{ session: ChatSession; messages: ChatMessage[] }> {
  const base = `/v1/chat/sessions/${sessionId}`;
  const session = await api<ChatSession>(base);
  const messages: ChatMessage[] = [];
  let cursor = "";
  do {
    const page = await api<Page & { messages: ChatMessage[] }>(`${base}/messages?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    messages.push(...page.messages);
    cursor = page.has_more ? page.next_cursor : "";
  } while (cursor);
  return { session, messages };
}

/**
 * One chat: its messages oldest first, the answer being written streamed in live, and a composer.
 * The page remounts it per session (`key`); `onChanged` tells the page the session's title or
 * activity moved so its list reads again.
 */
export function ChatConversation({ sessionId, onChanged }: { sessionId: string; onChanged: () => void }) {
  const [messages, setMessages] = useState<ChatMessage[]>();
  const [loadError, setLoadError] = useState<unknown>();
  const [version, setVersion] = useState(0);
  const replace = useCallback((message: ChatMessage) => setMessages((list) => list?.map((m) => (m.id === message.id ? message : m))), []);
  const stream = useChatStream(
    useCallback(
      (message: ChatMessage) => {
        replace(message);
        onChanged();
      },
      [replace, onChanged],
    ),
  );
  const { follow } = stream;

  useEffect(() => {
    let current = true;
    loadConversation(sessionId).then(
      ({ session, messages: loaded }) => {
        if (!current) return;
        setMessages(loaded);
        setLoadError(undefined);
        // A turn still running (sent from another tab, or before a reload) is picked up where it is.
        if (session.active_message_id) void follow(session.active_message_id, streamUrl(sessionId, session.active_message_id));
      },
      (caught: unknown) => current && setLoadError(caught),
    );
    return () => {
      current = false;
    };
  }, [sessionId, version, follow]);

  const scroller = useRef<HTMLOListElement>(null);
  const liveText = stream.live?.text;
  useEffect(() => {
    scroller.current?.scrollTo({ top: scroller.current.scrollHeight });
  }, [messages, liveText]);

  if (loadError && !messages) return <ErrorNotice error={loadError} onRetry={() => setVersion((v) => v + 1)} />;
  if (!messages) return <LoadingRows rows={2} height="h-24" label="Loading the conversation…" />;

  const running = messages.find((m) => m.role === "assistant" && !finished(m));
  const last = messages.at(-1);
  const canRegenerate = !running && last?.role === "assistant" && last.status !== "canceled";

  return (
    <div className="flex min-w-0 flex-col gap-3">
      {messages.length === 0 ? (
        <p className="rounded-lg border border-dashed border-slate-300 bg-white px-4 py-8 text-center text-sm text-slate-500">
          Ask about anything in your hubs. Say “Remember that …” to save something new; you approve each save first.
        </p>
      ) : (
        <ol ref={scroller} aria-label="Conversation" aria-live="polite" className="flex max-h-[60vh] flex-col gap-3 overflow-y-auto pr-1">
          {messages.map((message) =>
            message.role === "user" ? (
              <li key={message.id} className="ml-auto max-w-[85%] rounded-lg bg-indigo-600 px-3 py-2 text-sm whitespace-pre-line text-white" data-testid="chat-question">
                {message.content}
              </li>
            ) : (
              <li key={message.id} className="mr-auto w-full max-w-[85%]">
                <Answer sessionId={sessionId} message={message} live={stream.live?.messageId === message.id ? stream.live : undefined} />
              </li>
            ),
          )}
        </ol>
      )}
      {stream.error !== undefined && (
        <ErrorNotice error={stream.error} onRetry={running ? () => void follow(running.id, streamUrl(sessionId, running.id)) : undefined} />
      )}
      <TurnControls
        sessionId={sessionId}
        running={running}
        regenerate={canRegenerate ? last : undefined}
        onTurn={(turn, added) => {
          setMessages((list) => {
            const kept = (list ?? []).filter((m) => m.id !== turn.assistant_message.id && !added.some((a) => a.id === m.id));
            const swapped = kept.map((m) => (m.id === turn.prior_assistant_id ? turn.assistant_message : m));
            return swapped.some((m) => m.id === turn.assistant_message.id) ? swapped : [...swapped, ...added, turn.assistant_message];
          });
          onChanged();
          if (!finished(turn.assistant_message)) void follow(turn.active_message_id, turn.resume_url);
        }}
        onLocked={() => setVersion((v) => v + 1)}
      />
    </div>
  );
}

/** An assistant message: its text with citation links, the sources it cites, and while it runs, its progress and any approval. */
function Answer({ sessionId, message, live }: { sessionId: string; message: ChatMessage; live?: LiveTurn }) {
  const text = live ? live.text : message.content;
  const citations = message.citations ?? [];
  return (
    <div className="flex flex-col gap-2 rounded-lg border border-slate-200 bg-white px-3 py-2 shadow-sm" data-testid="chat-answer" aria-busy={!finished(message) || undefined}>
      {text && <CitedText text={text} source={citedSource(citations)} />}
      {!finished(message) && !live?.approval && <Spinner label={live?.activity ?? (text ? "Writing…" : "Thinking…")} />}
      {live?.approval && <ApprovalCard sessionId={sessionId} approval={live.approval} />}
      {message.status === "canceled" && <Badge>stopped</Badge>}
      {(message.status === "failed" || message.status === "partial_failed") && (
        <p role="alert" className="text-sm text-red-700">
          {message.error?.message ?? "The answer could not be finished"}
        </p>
      )}
      <SourceList citations={citations} />
    </div>
  );
}

/** The agent asks before it saves: what, where, and until when it waits. */
function ApprovalCard({ sessionId, approval }: { sessionId: string; approval: PendingApproval }) {
  const { busy, error, run } = useAction();
  const [choice, setChoice] = useState<"approve" | "deny">();
  const decide = (decision: "approve" | "deny") =>
    run(async () => {
      setChoice(decision);
      // The card goes away when the stream reports the decision (approval.decided).
      await api(`/v1/chat/sessions/${sessionId}/approvals/${approval.approval_id}`, { method: "POST", body: { decision } });
    });
  const where = approval.arguments.hub_name ? `“${approval.arguments.hub_name}”` : "your hub";
  return (
    <section aria-label="Approval needed" className="flex flex-col gap-2 rounded-md border border-amber-300 bg-amber-50 p-3" data-testid="chat-approval">
      <p className="text-sm font-medium text-amber-900">{approval.tool_name === "push_memory" ? `Save this as a memory in ${where}?` : `Allow ${approval.tool_name}?`}</p>
      {approval.arguments.content && <blockquote className="rounded bg-white px-3 py-2 text-sm whitespace-pre-line text-slate-800">{approval.arguments.content}</blockquote>}
      <p className="text-xs text-amber-800">Waits for your answer until {formatDate(approval.expires_at)}.</p>
      <div className="flex gap-2">
        <Button variant="primary" busy={busy && choice === "approve"} disabled={busy} onClick={() => decide("approve")}>
          Approve
        </Button>
        <Button busy={busy && choice === "deny"} disabled={busy} onClick={() => decide("deny")}>
          Deny
        </Button>
      </div>
      <ErrorNotice error={error} />
    </section>
  );
}

/**
 * The composer, Stop while a turn runs and Regenerate under the last answer. A send keeps its
 * idempotency key until it succeeds: retrying the same text after a lost response cannot start
 * a second turn, while each new message gets a fresh key.
 */
function TurnControls({
  sessionId,
  running,
  regenerate,
  onTurn,
  onLocked,
}: {
  sessionId: string;
  running: ChatMessage | undefined;
  regenerate: ChatMessage | undefined;
  onTurn: (turn: ChatTurn, added: ChatMessage[]) => void;
  onLocked: () => void;
}) {
  const [draft, setDraft] = useState("");
  const pending = useRef<{ content: string; key: string } | null>(null);
  const { busy, error, run } = useAction();
  const base = `/v1/chat/sessions/${sessionId}`;

  const send = () =>
    run(async () => {
      const content = draft.trim();
      if (pending.current?.content !== content) pending.current = { content, key: crypto.randomUUID() };
      let turn: ChatTurn;
      try {
        turn = await api<ChatTurn>(`${base}/messages`, { method: "POST", body: { content, idempotency_key: pending.current.key } });
      } catch (caught) {
        // Another tab (or a turn this page lost track of) holds the session: show it, and say why.
        if (caught instanceof ApiClientError && caught.code === "chat_session_locked") onLocked();
        throw caught;
      }
      pending.current = null;
      setDraft("");
      const asked: ChatMessage = {
        id: turn.user_message_id!,
        session_id: sessionId,
        sequence: turn.assistant_message.sequence - 1,
        role: "user",
        status: "completed",
        content,
        created_at: turn.assistant_message.created_at,
      };
      onTurn(turn, [asked]);
    });

  return (
    <div className="flex flex-col gap-2">
      <div className="flex flex-wrap gap-2">
        {running && (
          <StopButton key={running.id} url={`${base}/messages/${running.id}/cancel`} />
        )}
        {regenerate && (
          <Button
            busy={busy}
            onClick={() =>
              run(async () => {
                onTurn(await api<ChatTurn>(`${base}/messages/${regenerate.id}/regenerate`, { method: "POST" }), []);
              })
            }
          >
            Regenerate
          </Button>
        )}
      </div>
      <form
        className="flex flex-col gap-2"
        onSubmit={(event) => {
          event.preventDefault();
          if (draft.trim() && !running) void send();
        }}
      >
        <Field label="Your message">
          {(id) => (
            <textarea
              id={id}
              value={draft}
              onChange={(e) => setDraft(e.target.value)}
              onKeyDown={(e) => {
                // Enter sends, Shift+Enter starts a new line, as in most chat apps.
                if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
                  e.preventDefault();
                  e.currentTarget.form?.requestSubmit();
                }
              }}
              rows={3}
              maxLength={MAX_CHARS}
              placeholder="Ask your memories, or “Remember that …”"
              className="w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm shadow-sm placeholder:text-slate-400"
            />
          )}
        </Field>
        <div className="flex items-center justify-end gap-2">
          {running && <span className="text-xs text-slate-500">Wait for the answer, or stop it, to send again.</span>}
          <Button type="submit" variant="primary" busy={busy} disabled={!draft.trim() || running !== undefined}>
            Send
          </Button>
        </div>
      </form>
      <ErrorNotice error={error} />
    </div>
  );
}

/** Stop asks the server to cancel; the stream then ends the turn as canceled. */
function StopButton({ url }: { url: string }) {
  const { busy, error, run } = useAction();
  const [asked, setAsked] = useState(false);
  return (
    <>
      <Button
        variant="danger"
        busy={busy}
        disabled={asked}
        onClick={() =>
          run(async () => {
            await api(url, { method: "POST" });
            setAsked(true);
          })
        }
      >
        {asked ? "Stopping…" : "Stop"}
      </Button>
      <ErrorNotice error={error} />
    </>
  );
}
