import Link from "next/link";
import { connection } from "next/server";

// Rendered per request, not prebuilt at build time: a prebuilt page's scripts carry no nonce, and the
// page policy (proxy.ts, lib/web/content-security-policy.ts) would block every one of them.
export default async function NotFound() {
  await connection();
  return (
    <main className="mx-auto max-w-md px-6 py-24 text-center">
      <h1 className="text-2xl font-semibold">Not found</h1>
      <p className="mt-3 text-sm opacity-70">There is nothing at this address, or you cannot see it.</p>
      <Link href="/" className="mt-6 inline-block underline">
        Back to Engram
      </Link>
    </main>
  );
}
