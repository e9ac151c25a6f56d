import { afterAll, beforeAll, expect, test } from "vitest";
import type { Database } from "@/lib/db/database.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { openTestDatabase } from "./support/harness.ts";

// On the embedded database Prisma's statements run with its adapter's type parsers put in place of
// PGlite's own table for the statement (lib/db/pglite.ts), instead of PGlite copying both tables
// for every result. Raw SQL (lib/recall) must keep PGlite's own parsing, whatever runs beside it.

let database: Database & { url?: string };

beforeAll(async () => {
  database = await openTestDatabase();
});

afterAll(async () => {
  await database?.close();
});

const rawRow = async () => {
  const [row] = await database.sql.query<{ at: unknown; ids: unknown; n: unknown }>("SELECT now() AS at, ARRAY[1, 2]::int[] AS ids, 7::int4 AS n");
  return row!;
};

test("raw SQL and Prisma each keep their own value types when their statements interleave", async () => {
  const { user } = await createUser(database.prisma, { email: "parsers@example.test", name: "Parsers" }, new Date("2026-01-02T03:04:05Z"));
  const rounds = await Promise.all(
    Array.from({ length: 20 }, async (_, i) => {
      if (i % 3 === 0) return { raw: await rawRow() };
      if (i % 3 === 1) return { prisma: await database.prisma.user.findUniqueOrThrow({ where: { id: user.id } }) };
      // An interactive transaction: its statements get the adapter's parsers too.
      return { prisma: await database.prisma.$transaction((tx) => tx.user.findUniqueOrThrow({ where: { id: user.id } })), raw: await rawRow() };
    }),
  );
  for (const round of rounds) {
    if (round.raw) {
      expect(round.raw.at).toBeInstanceOf(Date);
      expect(round.raw.ids).toEqual([1, 2]);
      expect(round.raw.n).toBe(7);
    }
    if (round.prisma) expect(round.prisma.createdAt.toISOString()).toBe("2026-01-02T03:04:05.000Z");
  }
});

test("a failed Prisma statement leaves raw SQL's parsing as it was", async () => {
  await expect(database.prisma.$queryRawUnsafe("SELECT 1/0")).rejects.toThrow();
  await expect(database.prisma.user.create({ data: { id: "not-a-uuid", email: "x@example.test", name: "X" } as never })).rejects.toThrow();
  const row = await rawRow();
  expect(row.at).toBeInstanceOf(Date);
  expect(row.ids).toEqual([1, 2]);
});
