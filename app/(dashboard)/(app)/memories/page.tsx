import { redirect } from "next/navigation";
import { sessionUser } from "@/lib/auth/session-user.ts";
import { getDatabase } from "@/lib/db/database.ts";

/**
 * /memories — where the getting-started checklist (lib/onboarding/onboarding-items.ts, whose links
 * Memax clients also read) sends people to push and recall. Memories live in hubs: the personal hub's
 * page has both, so that is where it leads.
 */
export default async function MemoriesPage() {
  const user = await sessionUser();
  const personal = user
    ? await (await getDatabase()).prisma.hub.findFirst({ where: { ownerId: user.id, hubType: "personal" }, select: { id: true } })
    : null;
  redirect(personal ? `/hubs/${personal.id}` : "/hubs");
}
