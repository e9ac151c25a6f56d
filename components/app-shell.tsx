"use client";

import dynamic from "next/dynamic";
import Link from "next/link";
import { usePathname } from "next/navigation";
import { createContext, useContext, useEffect, useState, type ReactNode } from "react";
import { signOut } from "@/lib/web/auth-client.ts";
import { LiveEventsProvider } from "@/lib/web/live-events.tsx";
import { Button } from "./ui.tsx";

// The bell is secondary to the page: its code loads after the first content.
const NotificationBell = dynamic(() => import("./notification-bell.tsx").then((m) => m.NotificationBell), { ssr: false });

const NAV = [
  { href: "/hubs", label: "Hubs" },
  { href: "/chat", label: "Chat" },
  { href: "/api-keys", label: "API keys" },
  { href: "/api-reference", label: "API" },
];

export interface SessionUser {
  id: string;
  name: string;
  email: string;
}

const UserContext = createContext<SessionUser | null>(null);

/** The signed-in user (the dashboard layout guarantees one). */
export function useMe(): SessionUser {
  const user = useContext(UserContext);
  if (!user) throw new Error("useMe outside AppShell");
  return user;
}

export function AppShell({ user, children }: { user: SessionUser; children: ReactNode }) {
  const pathname = usePathname();
  const [leaving, setLeaving] = useState(false);
  return (
    <UserContext.Provider value={user}>
    <LiveEventsProvider>
    <div className="flex min-h-screen flex-col">
      <a href="#main" className="sr-only focus:not-sr-only focus:absolute focus:left-2 focus:top-2 focus:rounded focus:bg-white focus:px-3 focus:py-2">
        Skip to content
      </a>
      <header className="border-b border-slate-200 bg-white">
        <div className="mx-auto flex max-w-5xl flex-wrap items-center gap-x-4 gap-y-2 px-4 py-3">
          <Link href="/hubs" className="text-lg font-semibold tracking-tight text-indigo-700">
            Engram
          </Link>
          <nav aria-label="Main" className="flex gap-1">
            {NAV.map((item) => {
              const active = pathname === item.href || pathname.startsWith(`${item.href}/`);
              return (
                <Link
                  key={item.href}
                  href={item.href}
                  // Every page here is dynamic: prefetching would query the embedded database
                  // and compete with the current page's own API calls on first load.
                  prefetch={false}
                  aria-current={active ? "page" : undefined}
                  className={`rounded-md px-3 py-1.5 text-sm font-medium ${active ? "bg-indigo-50 text-indigo-700" : "text-slate-700 hover:bg-slate-100"}`}
                >
                  {item.label}
                </Link>
              );
            })}
          </nav>
          <div className="ml-auto flex items-center gap-2">
            <NotificationBell />
            <span className="hidden text-sm text-slate-600 sm:inline" title={user.email}>
              {user.name}
            </span>
            <Button
              variant="ghost"
              busy={leaving}
              onClick={async () => {
                setLeaving(true);
                await signOut().catch(() => setLeaving(false));
              }}
            >
              Sign out
            </Button>
          </div>
        </div>
      </header>
      <main id="main" className="mx-auto w-full max-w-5xl flex-1 px-4 py-6">
        {children}
      </main>
    </div>
    </LiveEventsProvider>
    </UserContext.Provider>
  );
}

/** Client-side bounce to sign-in that keeps the current address as the way back. */
export function RedirectToSignIn() {
  useEffect(() => {
    window.location.replace(`/sign-in?callbackUrl=${encodeURIComponent(`${window.location.pathname}${window.location.search}`)}`);
  }, []);
  return (
    <p role="status" className="p-8 text-center text-slate-600">
      Redirecting to sign in…
    </p>
  );
}
