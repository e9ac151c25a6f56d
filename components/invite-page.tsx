"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { useAction } from "@/lib/web/use-action.ts";
import { api, ApiClientError } from "@/lib/web/api.ts";
import { formatDate, plural } from "@/lib/web/format.ts";
import type { Hub, PublicInvite } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { Button, ErrorNotice, LoadingRows, RoleBadge } from "./ui.tsx";

const DEAD: Record<string, { title: string; body: string }> = {
  expired: { title: "This invite has expired", body: "Invites are valid for 7 days. Ask whoever invited you for a new link." },
  revoked: { title: "This invite was revoked", body: "The hub’s admins withdrew or replaced this link. Ask them for a new one." },
  accepted: { title: "This invite has already been used", body: "Each invite link works once. Ask for a new link if you still need to join." },
  used: { title: "This invite has already been used", body: "Each invite link works once. Ask for a new link if you still need to join." },
  not_found: { title: "Invite not found", body: "The link is wrong or was replaced by a newer one. Check that you copied all of it." },
};

function Frame({ children }: { children: React.ReactNode }) {
  return (
    <main className="flex min-h-screen items-start justify-center px-4 py-12 sm:items-center">
      <div className="w-full max-w-md rounded-xl border border-slate-200 bg-white p-6 shadow-sm">
        <p className="mb-4 text-lg font-semibold text-indigo-700">Engram</p>
        {children}
      </div>
    </main>
  );
}

function DeadInvite({ state }: { state: string }) {
  const copy = DEAD[state] ?? DEAD.not_found!;
  return (
    <Frame>
      <h1 className="text-2xl font-semibold">{copy.title}</h1>
      <p className="mt-2 text-sm text-slate-600">{copy.body}</p>
      <Link href="/hubs" className="mt-5 inline-block text-sm text-indigo-700 underline">
        Go to your hubs
      </Link>
    </Frame>
  );
}

export function InvitePage({ token, user, signUpOpen }: { token: string; user: { name: string } | null; signUpOpen: boolean }) {
  const router = useRouter();
  const invite = useApi<PublicInvite>(`/v1/invites/${encodeURIComponent(token)}`);
  const { busy, error, run } = useAction();
  const [alreadyIn, setAlreadyIn] = useState(false);
  const back = `/invite/${encodeURIComponent(token)}`;

  if (invite.error) {
    const code = invite.error instanceof ApiClientError ? invite.error.code : "";
    if (code === "not_found" || DEAD[code]) return <DeadInvite state={code} />;
    return (
      <Frame>
        <ErrorNotice error={invite.error} onRetry={invite.reload} />
      </Frame>
    );
  }
  if (!invite.data) {
    return (
      <Frame>
        <LoadingRows rows={1} height="h-40" label="Loading invite…" />
      </Frame>
    );
  }
  const { invite: details, hub, invited_by, member_count } = invite.data;
  if (details.state !== "active") return <DeadInvite state={details.state} />;

  return (
    <Frame>
      <p className="text-sm text-slate-600">{invited_by} invited you to join</p>
      <h1 className="mt-1 break-words text-2xl font-semibold">{hub.name}</h1>
      <dl className="mt-4 grid grid-cols-[auto_1fr] gap-x-4 gap-y-2 text-sm">
        <dt className="text-slate-500">Your role</dt>
        <dd>
          <RoleBadge role={details.role} />
        </dd>
        <dt className="text-slate-500">Members</dt>
        <dd>{plural(member_count, "member")}</dd>
        <dt className="text-slate-500">Invited by</dt>
        <dd>{invited_by}</dd>
        <dt className="text-slate-500">Expires</dt>
        <dd>{formatDate(details.expires_at)}</dd>
      </dl>
      <div className="mt-6 flex flex-col gap-3">
        {user ? (
          alreadyIn ? (
            <Link href={`/hubs/${hub.id}`} className="rounded-md bg-indigo-600 px-3 py-2 text-center text-sm font-medium text-white">
              You are already a member — open the hub
            </Link>
          ) : (
            <>
              <Button
                variant="primary"
                busy={busy}
                onClick={() =>
                  run(async () => {
                    try {
                      const joined = await api<{ hub: Hub }>(`/v1/invites/${encodeURIComponent(token)}/accept`, { method: "POST" });
                      router.push(`/hubs/${joined.hub.id}`);
                    } catch (caught) {
                      // Already in the hub is not an error: the page offers the way in instead.
                      if (!(caught instanceof ApiClientError && caught.code === "already_member")) throw caught;
                      setAlreadyIn(true);
                    }
                  })
                }
              >
                Join {hub.name} as {user.name}
              </Button>
              <ErrorNotice error={error} />
            </>
          )
        ) : (
          <>
            <Link href={`/sign-in?callbackUrl=${encodeURIComponent(back)}`} className="rounded-md bg-indigo-600 px-3 py-2 text-center text-sm font-medium text-white hover:bg-indigo-700">
              Sign in to join
            </Link>
            {signUpOpen && (
              <Link
                href={`/sign-up?callbackUrl=${encodeURIComponent(back)}`}
                className="rounded-md border border-slate-300 px-3 py-2 text-center text-sm font-medium text-slate-800 hover:bg-slate-50"
              >
                Create an account
              </Link>
            )}
          </>
        )}
      </div>
    </Frame>
  );
}
