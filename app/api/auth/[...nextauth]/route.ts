import NextAuth from "next-auth";
import type { NextRequest } from "next/server";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import { getDatabase } from "@/lib/db/database.ts";

type Context = { params: Promise<{ nextauth: string[] }> };

// GET|POST /api/auth/* — next-auth's sign-in, callback, csrf, session and sign-out endpoints
async function handler(req: NextRequest, context: Context): Promise<Response> {
  const { prisma } = await getDatabase();
  return NextAuth(req, context, await sessionOptions(prisma));
}

export { handler as GET, handler as POST };
